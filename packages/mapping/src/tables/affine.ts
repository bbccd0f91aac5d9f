// Recovery of affine structure in a raw table (DESIGN: "a raw table that turns out to be
// affine is recovered as an expression"), so a dynamic map can become a static one and the
// emitted kernel computes instead of loading.
import { MappingError } from "../errors.js";
import { bounds } from "../expr/bounds.js";
import { add, constant, mod, mul, type Expr } from "../expr/expr.js";
import { simplify } from "../expr/simplify.js";
import type { IndexMap, TableValues } from "./table.js";

/**
 * If `values[i] == a*i + b` for every i, returns `simplify(a*index + b)`; else if
 * `values[i] == (a*i + b) mod m` for every i (rank-rotated orders like `(i + rank) % world`),
 * returns `simplify((a*index + b) mod m)`; otherwise `undefined`. Throws
 * `index-out-of-bounds` when the range of `index` leaves `[0, values.length)`, `non-integer`
 * for a value that is not a safe integer, and `invalid-size` for an empty table.
 */
export function recoverAffine(values: readonly number[], index: Expr): Expr | undefined {
  if (values.length === 0) throw new MappingError("invalid-size", "cannot recover an expression from an empty table");
  values.forEach((v, i) => {
    if (!Number.isSafeInteger(v)) throw new MappingError("non-integer", `values[${i}] = ${v} is not a safe integer`);
  });
  const r = bounds(index);
  if (r.min < 0 || r.max >= values.length) {
    throw new MappingError("index-out-of-bounds", `index ranges over [${r.min}, ${r.max}] but the table has ${values.length} entries`);
  }
  const b = values[0] as number;
  const steps = new Set<number>();
  for (let i = 1; i < values.length; i++) steps.add((values[i] as number) - (values[i - 1] as number));
  if (steps.size <= 1) {
    const a = steps.size === 0 ? 0 : ([...steps][0] as number);
    return fits(values, (i) => a * i + b) ? simplify(add(mul(a, index), b)) : undefined;
  }
  // (a*i + b) mod m steps by a (no wrap) or a - m (wrap), so exactly two steps appear and
  // their difference is the modulus.
  if (steps.size !== 2) return undefined;
  const [s1, s2] = [...steps].sort((x, y) => y - x) as [number, number];
  const m = s1 - s2;
  const a = s1;
  if (!(s2 < 0 && a >= 0 && a < m && b >= 0 && b < m)) return undefined;
  if (!fits(values, (i) => (a * i + b) % m)) return undefined;
  return simplify(mod(add(mul(a, index), constant(b)), m));
}

function fits(values: readonly number[], f: (i: number) => number): boolean {
  return values.every((v, i) => Number.isSafeInteger(f(i)) && f(i) === v);
}

/**
 * A dynamic map whose filled table is affine (or modular-affine) in its position, turned into
 * the equivalent static map `f(index)`; any other map is returned unchanged.
 */
export function staticIfAffine(map: IndexMap, tables?: TableValues): IndexMap {
  if (map.kind === "static") return map;
  const values = tables?.[map.table.name] ?? map.table.values;
  if (values === undefined || values.length !== map.table.length) return map;
  const expr = recoverAffine(values, map.index);
  return expr === undefined ? map : { kind: "static", expr };
}
