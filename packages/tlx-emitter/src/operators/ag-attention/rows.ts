// Sequence-parallel attention for any sequence length: S, every rank's positions together (rank r holds
// positions r·m … (r+1)·m, m = S / world), is a run-time argument. The kv rows are gathered by AllGather+GEMM's
// swizzle push AllGather over S (`../ag-gemm/rows.ts`: chunk c of rank q signalled in slot q·split + c), and the kv
// loop visits kv blocks of BLOCK_N rows in that AllGather's consumer order (its own blocks first, then r+1's, …).
// Its arrival groups have one count at every S: group 0 the rank's own blocks (no wait), then one group per chunk of
// every other rank in arrival order, starting at the first block that meets the chunk and waiting on its slot
// alone. Where a group starts and which block it starts at are @ovl/mapping expressions of S (`ovl_rows`); the
// slots waited are the same at every S. All of it is checked at every S served (`checkAgAttentionRows`), the
// causal clipping of every query block included, before it is written.
import { add, ceilDiv, constant, floorDiv, mod, simplify, sub, toFunction, type Expr } from "@ovl/mapping";
import type { Rows } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import { DOMAIN_VARIABLE, RANK_VARIABLE } from "../../local/program.js";
import { checkAgGemmRows, ROWS_VARIABLE, type AgRowsMaps, type AgRowsShape, type RowsFail } from "../ag-gemm/rows.js";
import { clipGroup } from "./kv-groups.js";

/** Every rank's arrival groups over S: `count` groups, each table a rank's `count + 1` entries. */
export interface AttentionRowsGroups {
  readonly count: number;
  /** Group g's visit positions are `[starts[r][g], starts[r][g + 1])`; the last entry is the kv block count. */
  readonly starts: Expr[][];
  /** The kv block group g starts at (its blocks run consecutively); the last entry is the kv block count. */
  readonly firsts: Expr[][];
  /** Group g waits on `waits[r][waitAt[r][g] .. waitAt[r][g + 1])` (the same at every S). */
  readonly waitAt: number[][];
  readonly waits: number[][];
}

/** The chunks rank `r` receives, in arrival order: rank r+1's chunks 0 … split-1, then r+2's, … */
function arrivals(r: number, world: number, split: number): { q: number; c: number }[] {
  return Array.from({ length: (world - 1) * split }, (_, j) => ({ q: (r + 1 + Math.floor(j / split)) % world, c: j % split }));
}

/**
 * The arrival groups of `s` (kv blocks of `s.blockM` rows) under `maps` (`agRowsMaps(s)`), as expressions of S.
 * A chunk of another rank is at least a kv block tall (`minRowsPerRank`), so each chunk starts a group of its own.
 */
export function attentionRowsGroups(s: AgRowsShape, maps: AgRowsMaps): AttentionRowsGroups {
  const { world: W, split: S, blockM: BN } = s;
  const nb = maps.numPidM;
  const count = 1 + (W - 1) * S;
  const starts: Expr[][] = [];
  const firsts: Expr[][] = [];
  const waitAt: number[][] = [];
  const waits: number[][] = [];
  for (let r = 0; r < W; r++) {
    // Visit position p reads kv block (p + b0) mod nb: b0 is the rank's first block starting in its own rows.
    const b0 = ceilDiv(maps.chunk(r, 0).start, BN);
    const chunks = arrivals(r, W, S);
    const first = chunks.map(({ q, c }) => floorDiv(maps.chunk(q, c).start, BN));
    starts.push([constant(0), ...first.map((b) => mod(add(sub(b, b0), nb), nb)), nb].map(simplify));
    firsts.push([b0, ...first, nb].map(simplify));
    // Group 0 waits on nothing, every other group on its chunk's slot.
    waitAt.push([0, ...Array.from({ length: count }, (_, g) => g)]);
    waits.push(chunks.length === 0 ? [0] : chunks.map(({ q, c }) => q * S + c));
  }
  return { count, starts, firsts, waitAt, waits };
}

/** The tables of `groups` at S = `at`: each rank's entries evaluated. */
export function groupValuesAt(rows: readonly (readonly Expr[])[], at: number): number[][] {
  return rows.map((r) => r.map((e) => toFunction(e, [ROWS_VARIABLE])(at)));
}

/**
 * Checks, at every S of the range: the AllGather and the visit order as AllGather+GEMM's check does (every row of
 * every other rank delivered once into its chunk's slot; every kv block visited once); then each rank's groups:
 * they cut the visit positions in order, each a run of consecutive kv blocks from its first, every slot waited once,
 * written by a host op, before the first block whose rows need it; and, with `causalBlock` (the query block), that
 * every query block's clipped loops (off the diagonal, then on it) visit exactly the kv blocks before its diagonal
 * block and from there to its last query position, once each. Returns how many lengths were checked.
 * @throws {EmitError} `bad-schedule` naming the first length, rank and group that breaks it.
 */
export function checkAgAttentionRows(
  s: AgRowsShape,
  maps: AgRowsMaps,
  hostOps: Rows["hostOps"],
  groups: AttentionRowsGroups,
  causalBlock?: number,
): number {
  const checked = checkAgGemmRows(s, maps, hostOps, "AllGather+attention");
  const { world: W, blockM: BN } = s;
  const v = [ROWS_VARIABLE, RANK_VARIABLE, DOMAIN_VARIABLE.consumer];
  const order = toFunction(maps.order, v);
  const slots = maps.slots.map((e) => toFunction(e, v));
  const blocks = toFunction(maps.numPidM, v);
  const fn = (t: Expr[][]) => t.map((r) => r.map((e) => toFunction(e, [ROWS_VARIABLE])));
  const [starts, firsts] = [fn(groups.starts), fn(groups.firsts)];
  const fail: RowsFail = (M, what) => {
    throw new EmitError("bad-schedule", `AllGather+attention over a sequence of ${M}: ${what}`);
  };
  const written = new Set(hostOps.flatMap((h) => h.streams.flatMap((st) => st.ops.map((op) => `${op.signal?.rank}:${op.signal?.slot}`))));
  for (let M = s.min; M <= s.max; M += W) {
    const nb = blocks(M, 0, 0);
    for (let r = 0; r < W; r++) {
      const st = starts[r]!.map((f) => f(M));
      const fi = firsts[r]!.map((f) => f(M));
      const [at, ws] = [groups.waitAt[r]!, groups.waits[r]!];
      if (st.length !== groups.count + 1 || fi.length !== groups.count + 1 || at.length !== groups.count + 1)
        fail(M, `rank ${r}'s group tables do not hold ${groups.count + 1} entries`);
      if (st[0] !== 0 || st[groups.count] !== nb || fi[groups.count] !== nb)
        fail(M, `rank ${r}'s groups span positions ${st[0]}..${st[groups.count]}, not 0..${nb}`);
      const waited = new Set<number>();
      for (let g = 0; g < groups.count; g++) {
        const [lo, hi] = [st[g]!, st[g + 1]!];
        if (hi < lo) fail(M, `rank ${r}'s group ${g} ends at position ${hi} before it starts at ${lo}`);
        for (let w = at[g]!; w < at[g + 1]!; w++) {
          const x = ws[w]!;
          if (waited.has(x)) fail(M, `rank ${r}'s group ${g} waits again on slot ${x}`);
          if (!written.has(`${r}:${x}`)) fail(M, `rank ${r}'s group ${g} waits on slot ${x}, which nothing writes`);
          waited.add(x);
        }
        for (let p = lo; p < hi; p++) {
          const b = order(M, r, p);
          if (b !== fi[g]! + p - lo) fail(M, `rank ${r}'s group ${g} visits kv block ${b} at position ${p}, not ${fi[g]! + p - lo}`);
          for (const f of slots) {
            const x = f(M, r, b);
            if (x >= 0 && !waited.has(x)) fail(M, `rank ${r} reads kv block ${b} in group ${g} before waiting on slot ${x}`);
          }
        }
      }
      if (causalBlock !== undefined) checkCausalClipping(fail, { M, rank: r, world: W, blockN: BN, blockQ: causalBlock, nb, st, fi });
    }
  }
  return checked;
}

/** One rank's groups at one length, as the kernel's causal loops clip them. */
interface CausalAt {
  readonly M: number;
  readonly rank: number;
  readonly world: number;
  readonly blockN: number;
  readonly blockQ: number;
  readonly nb: number;
  readonly st: readonly number[];
  readonly fi: readonly number[];
}

/**
 * For every query block of the rank, the kv blocks its two causal loops visit (each group clipped as the kernel
 * clips it, `clipGroup`) are exactly `[0, kv_diag)` and `[kv_diag, kv_end)`, each once.
 */
function checkCausalClipping(fail: RowsFail, c: CausalAt): void {
  const { M, rank: r, blockN: BN, blockQ: BQ, nb, st, fi } = c;
  const m = M / c.world;
  for (let pid = 0; pid * BQ < m; pid++) {
    const diag = Math.floor((r * m + pid * BQ) / BN);
    const end = Math.ceil(Math.min(r * m + (pid + 1) * BQ, M) / BN);
    for (const [from, to, what] of [
      [0, diag, "off the diagonal"],
      [diag, end, "on the diagonal"],
    ] as const) {
      const runs: [number, number][] = [];
      for (let g = 0; g + 1 < st.length; g++) {
        const hi = Math.min(st[g + 1]!, nb);
        const [p0, p1] = clipGroup(st[g]!, hi, fi[g]!, from, to);
        if (p1 > p0) runs.push([fi[g]! + p0 - st[g]!, fi[g]! + p1 - st[g]!]);
      }
      let next = from;
      for (const [lo, hi] of runs.sort((x, y) => x[0] - y[0])) {
        if (lo !== next) fail(M, `rank ${r}'s query block ${pid} ${what} visits kv blocks ${lo}..${hi}, expected from ${next}`);
        next = hi;
      }
      if (next !== Math.max(from, to)) fail(M, `rank ${r}'s query block ${pid} ${what} stops at kv block ${next}, not ${to}`);
    }
  }
}
