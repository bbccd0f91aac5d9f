// The thin layer between raw per-tile tables and @ovl/mapping (TileLink §4.1): a table
// that fits `a*v+b` or `(a*v+b) mod m` becomes a static map, any other a lookup table.
import {
  dynamicMap,
  evaluate,
  evaluateMap,
  fillTable,
  lookupTable,
  recoverAffine,
  staticMap,
  variable,
  type Expr,
  type IndexMap,
} from "@ovl/mapping";

/** Name of the visit-step variable every map of a schedule is written over. */
export const VISIT_VARIABLE = "v";

/** The visit-step variable `v` in `[0, numTiles)`. */
export function visitIndex(numTiles: number): Expr {
  return variable(VISIT_VARIABLE, { min: 0, max: Math.max(0, numTiles - 1) });
}

/**
 * `values` (indexed by the visit step) as an index map: static when @ovl/mapping
 * recovers an affine or modular expression that reproduces every entry, otherwise a
 * lookup table named `name` (an identifier), int32 when every value fits, int64 otherwise.
 */
export function tableToIndexMap(name: string, values: readonly number[]): IndexMap {
  const index = visitIndex(values.length);
  const recovered = recoverAffine(values, index);
  if (recovered !== undefined && reproduces(recovered, values)) return staticMap(recovered);
  const fits32 = values.every((x) => x >= -(2 ** 31) && x < 2 ** 31);
  return dynamicMap(fillTable(lookupTable(name, values.length, fits32 ? "int32" : "int64"), values), index);
}

/**
 * True when `map` yields `values[v]` at every visit step: a static map by evaluation,
 * a dynamic one by its table's values (a table without values cannot be checked).
 */
export function indexMapMatches(map: IndexMap, values: readonly number[]): boolean {
  try {
    return values.every((x, v) => evaluateMap(map, { [VISIT_VARIABLE]: v }) === x);
  } catch {
    // An unfilled table, an index out of range or a malformed expression reproduces nothing.
    return false;
  }
}

function reproduces(expr: Expr, values: readonly number[]): boolean {
  return values.every((x, v) => evaluate(expr, { [VISIT_VARIABLE]: v }) === x);
}
