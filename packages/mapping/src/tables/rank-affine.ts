// One expression for every rank's table (TileLink §4.1: a kernel source is shared by all
// ranks, so a static map must be written over the rank id): per-rank tables that are
// affine or modular-affine in their index (or in index // d, for tables constant on runs of
// d entries: a chunk's slot per m-block) with a rank-affine offset become one expression over
// (index, rank), and so do such tables with a window of "none" (-1) entries squeezed out (an
// AllGather's wait slots: none on the rank's own shard); anything else stays a run-time lookup table.
import { MappingError } from "../errors.js";
import { gcd } from "../expr/arith.js";
import { bounds } from "../expr/bounds.js";
import { add, floorDiv, max, mod, mul, sub, type Expr } from "../expr/expr.js";
import { evaluate } from "../expr/evaluate.js";
import { simplify } from "../expr/simplify.js";

/** A per-rank table: `values[rank][i]`. */
export type RankTables = readonly (readonly number[])[];

interface Fit {
  readonly a: number;
  readonly b: number;
  /** The modulus, or undefined for a plain affine fit. */
  readonly m: number | undefined;
}

/** `values[i] == a*i + b` or `(a*i + b) mod m` with `0 <= a, b < m`, or undefined. */
function fitOne(values: readonly number[]): Fit | undefined {
  const b = values[0] as number;
  const steps = new Set<number>();
  for (let i = 1; i < values.length; i++) steps.add((values[i] as number) - (values[i - 1] as number));
  if (steps.size <= 1) {
    const a = steps.size === 0 ? 0 : ([...steps][0] as number);
    return { a, b, m: undefined };
  }
  if (steps.size !== 2) return undefined;
  const [s1, s2] = [...steps].sort((x, y) => y - x) as [number, number];
  const m = s1 - s2;
  if (!(s2 < 0 && s1 >= 0 && s1 < m && b >= 0 && b < m)) return undefined;
  return { a: s1, b, m };
}

/** `c_r == alpha*r + beta` for every rank r, or undefined. */
function fitRanks(cs: readonly number[]): { alpha: number; beta: number } | undefined {
  const beta = cs[0] as number;
  const alpha = cs.length > 1 ? (cs[1] as number) - beta : 0;
  return cs.every((c, r) => c === alpha * r + beta) ? { alpha, beta } : undefined;
}

/**
 * The longest run length `d > 1` every table is constant on (entries `k·d .. k·d + d - 1`, the
 * last run possibly shorter): the gcd of the positions where any table's value changes, or
 * undefined when no table changes or the gcd is 1.
 */
function commonRun(tables: RankTables): number | undefined {
  let d = 0;
  for (const t of tables) for (let i = 1; i < t.length; i++) if (t[i] !== t[i - 1]) d = gcd(d, i);
  return d > 1 ? d : undefined;
}

/** `f(index, rank)` fitted to the tables (`fitOne` per rank, offsets affine in the rank), unchecked; or undefined. */
function fitTables(tables: RankTables, index: Expr, rank: Expr): Expr | undefined {
  const length = tables[0]?.length ?? 0;
  const fits = tables.map(fitOne);
  if (fits.some((f) => f === undefined)) return undefined;
  const all = fits as Fit[];
  const moduli = new Set(all.map((f) => f.m).filter((m) => m !== undefined));
  if (moduli.size > 1) return undefined;
  const m = [...moduli][0];
  // One slope for every rank (a one-entry table has none of its own).
  const a = (m === undefined ? all[0]! : all.find((f) => f.m !== undefined)!).a;
  if (length > 1 && all.some((f) => f.a !== a)) return undefined;
  const bs = all.map((f) => f.b);
  if (m === undefined) {
    const fit = fitRanks(bs);
    return fit === undefined ? undefined : add(mul(a, index), mul(fit.alpha, rank), fit.beta);
  }
  // Offsets compared mod m: rank r's b is alpha*r + beta reduced into [0, m).
  const beta = bs[0] as number;
  const alpha = ((((bs[1] ?? beta) - beta) % m) + m) % m;
  return bs.every((b, r) => b === (((alpha * r + beta) % m) + m) % m) ? mod(add(mul(a, index), mul(alpha, rank), beta), m) : undefined;
}

/** `c + fitTables(tables - c)` with `c` the smallest entry: a modular fit above zero (`65 + (index + rank) % 8`). */
function fitShifted(tables: RankTables, index: Expr, rank: Expr): Expr | undefined {
  const c = Math.min(...tables.map((t) => Math.min(...t)));
  if (c === 0) return undefined;
  const shifted = fitTables(
    tables.map((t) => t.map((v) => v - c)),
    index,
    rank,
  );
  return shifted === undefined ? undefined : add(c, shifted);
}

/** The entry a windowed table holds where it names nothing (an m-block that waits on no slot). */
const NONE_ENTRY = -1;

/** One window `[lo, lo + width)` of {@link NONE_ENTRY} entries, or undefined when the none entries are not one non-empty run. */
function noneWindow(t: readonly number[]): { lo: number; width: number } | undefined {
  const lo = t.indexOf(NONE_ENTRY);
  if (lo < 0) return undefined;
  let hi = lo;
  while (hi < t.length && t[hi] === NONE_ENTRY) hi++;
  return t.indexOf(NONE_ENTRY, hi) < 0 ? { lo, width: hi - lo } : undefined;
}

/**
 * Tables that hold {@link NONE_ENTRY} on one window of `w` entries per rank, starting at a
 * rank-affine `lo(r)`, and elsewhere a non-negative fit `g` (`fitTables` / `fitShifted`) of the
 * index with the window squeezed out — an AllGather's wait slots, numbered over every shard but
 * the rank's own. With `L` entries, `hi = lo + w`, `after = (index + L - hi) // L` (1 past the
 * window, else 0), `before = (lo + L - 1 - index) // L` (1 ahead of it) and `B` one more than
 * `g`'s upper bound, the entry is `max(g(index - w·after, rank) + B·(after + before - 1), -1)`: every
 * floor division has a non-negative dividend (Triton computes it exactly) and no product of two
 * variables is left for `simplify` to multiply out. Unchecked; undefined where no such fit exists.
 */
function fitWindowed(tables: RankTables, index: Expr, rank: Expr): Expr | undefined {
  const length = tables[0]?.length ?? 0;
  const windows = tables.map(noneWindow);
  if (windows.some((w) => w === undefined)) return undefined;
  const ws = windows as { lo: number; width: number }[];
  const width = ws[0]!.width;
  if (width >= length || ws.some((w) => w.width !== width)) return undefined;
  const lo = fitRanks(ws.map((w) => w.lo));
  if (lo === undefined) return undefined;
  const squeezed = tables.map((t, r) => t.filter((_, i) => i < ws[r]!.lo || i >= ws[r]!.lo + width));
  if (squeezed.some((t) => t.some((v) => v < 0))) return undefined;
  const loE = add(mul(lo.alpha, rank), lo.beta);
  const after = floorDiv(sub(add(index, length), add(loE, width)), length);
  const before = floorDiv(sub(add(loE, length - 1), index), length);
  const j = sub(index, mul(width, after));
  const g = fitTables(squeezed, j, rank) ?? fitShifted(squeezed, j, rank);
  if (g === undefined) return undefined;
  // Inside the window g is evaluated at unsqueezed indices: B exceeds g's bound over every index.
  const big = Math.max(bounds(g).max, 0) + 1;
  return max(add(g, mul(big, sub(add(after, before), 1))), NONE_ENTRY);
}

/**
 * If every rank's table is `f(index, rank)` for one expression `f` of the form
 * `a*index + alpha*rank + beta` or `(a*index + alpha*rank + beta) mod m` (a rank-rotated
 * visit order is the usual case), returns `simplify(f)`; otherwise `undefined`. A modular
 * fit with one rank's offset wrapped past `m` is still found (offsets are compared mod m).
 * Tables constant on runs of `d` entries (every change of value at a multiple of `d`, as a
 * chunk's slot per m-block is) are fitted the same way in `index // d`, a modular fit may
 * sit above zero (`c + (…) mod m`, `c` the smallest entry), and tables that are -1 on one
 * window of `w` entries at a rank-affine start and such a fit elsewhere, the window squeezed
 * out, are fitted too (`fitWindowed`: an AllGather's wait slots, none on the rank's own shard).
 * The result is checked against every entry of every table before it is returned.
 * @throws {MappingError} `invalid-size` for no ranks, tables of different or zero
 *   length; `index-out-of-bounds` when `index` ranges outside the tables or `rank`
 *   outside the ranks; `non-integer` for values that are not safe integers.
 */
export function recoverRankAffine(tables: RankTables, index: Expr, rank: Expr): Expr | undefined {
  const length = tables[0]?.length ?? 0;
  if (tables.length === 0 || length === 0)
    throw new MappingError("invalid-size", "cannot recover an expression from no tables or empty tables");
  tables.forEach((t, r) => {
    if (t.length !== length) throw new MappingError("invalid-size", `rank ${r}'s table has ${t.length} entries, rank 0's ${length}`);
    t.forEach((v, i) => {
      if (!Number.isSafeInteger(v)) throw new MappingError("non-integer", `tables[${r}][${i}] = ${v} is not a safe integer`);
    });
  });
  const ib = bounds(index);
  if (ib.min < 0 || ib.max >= length) {
    throw new MappingError("index-out-of-bounds", `index ranges over [${ib.min}, ${ib.max}] but the tables have ${length} entries`);
  }
  const rb = bounds(rank);
  if (rb.min < 0 || rb.max >= tables.length) {
    throw new MappingError("index-out-of-bounds", `rank ranges over [${rb.min}, ${rb.max}] but there are ${tables.length} tables`);
  }
  // Candidates in order: the tables as they are, shifted down to zero, then both in index // d for
  // tables constant on runs of d; the first that reproduces every entry wins.
  const d = commonRun(tables);
  const runs = d === undefined ? undefined : tables.map((t) => t.filter((_, i) => i % d === 0));
  const candidates = [
    () => fitTables(tables, index, rank),
    () => fitShifted(tables, index, rank),
    () => (runs === undefined ? undefined : fitTables(runs, floorDiv(index, d as number), rank)),
    () => (runs === undefined ? undefined : fitShifted(runs, floorDiv(index, d as number), rank)),
    () => fitWindowed(tables, index, rank),
    () => (runs === undefined ? undefined : fitWindowed(runs, floorDiv(index, d as number), rank)),
  ];
  const indexName = index.op === "var" ? index.name : undefined;
  const rankName = rank.op === "var" ? rank.name : undefined;
  const reproduces = (e: Expr): boolean => {
    if (indexName === undefined || rankName === undefined) return true;
    for (let r = rb.min; r <= rb.max; r++) {
      const t = tables[r]!;
      for (let i = ib.min; i <= ib.max; i++) if (evaluate(e, { [indexName]: i, [rankName]: r }) !== t[i]) return false;
    }
    return true;
  };
  for (const fit of candidates) {
    const e = fit();
    if (e === undefined) continue;
    const out = simplify(e);
    if (reproduces(out)) return out;
  }
  return undefined;
}
