// Lookup tables and index maps: TileLink §4.1's dynamic mapping ("range = [f_S_low[tile_id],
// f_S_high[tile_id]), rank = f_R[tile_id], channel = f_C[tile_id]"), where the table's shape
// is known when code is emitted and its values are filled at run time.
import { z } from "zod";
import { MappingError, checkSize } from "../errors.js";
import { bounds } from "../expr/bounds.js";
import { evaluate, type Env } from "../expr/evaluate.js";
import { ExprSchema, type Expr } from "../expr/expr.js";
import { checkIdentifier, isValidIdentifier } from "../expr/identifier.js";
import { toPython, type PythonOptions } from "../expr/print.js";
import { simplify } from "../expr/simplify.js";

/** Element type of a lookup table in device memory. */
export type TableDtype = "int32" | "int64";

/** A table of integers whose name, length and dtype are fixed at emit time; `values` come later. */
export interface LookupTable {
  name: string;
  length: number;
  dtype: TableDtype;
  values?: number[];
}

/** zod schema of {@link LookupTable}. */
export const LookupTableSchema = z.object({
  name: z.string().refine(isValidIdentifier, { message: "invalid table name" }),
  length: z.int().min(1),
  dtype: z.enum(["int32", "int64"]),
  values: z.array(z.int()).optional(),
});

/**
 * A tile mapping: `static` is an expression over tile ids, `dynamic` reads `table[index]`
 * where `index` is an expression over tile ids.
 */
export type IndexMap = { kind: "static"; expr: Expr } | { kind: "dynamic"; table: LookupTable; index: Expr };

/** zod schema of {@link IndexMap}. */
export const IndexMapSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("static"), expr: ExprSchema }),
  z.object({ kind: z.literal("dynamic"), table: LookupTableSchema, index: ExprSchema }),
]);

/** Run-time values of tables by table name (overriding any `values` stored in the table). */
export type TableValues = Readonly<Record<string, readonly number[]>>;

const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

/** Declares a table (no values yet). Throws `invalid-identifier` or `invalid-size`. */
export function lookupTable(name: string, length: number, dtype: TableDtype = "int32"): LookupTable {
  checkIdentifier(name, "table name");
  checkSize(length, `length of table ${name}`);
  return { name, length, dtype };
}

/**
 * Checks `values` against the table's declared length (`table-length`) and dtype
 * (`table-dtype`: integers within int32, or safe integers for int64) and returns the filled table.
 */
export function fillTable(table: LookupTable, values: readonly number[]): LookupTable {
  checkTableValues(table, values);
  return { ...table, values: [...values] };
}

function checkTableValues(table: LookupTable, values: readonly number[]): void {
  if (values.length !== table.length) {
    throw new MappingError("table-length", `table ${table.name} is declared with length ${table.length} but got ${values.length} values`);
  }
  const limit = table.dtype === "int32" ? INT32 : { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER };
  values.forEach((v, i) => {
    if (!Number.isInteger(v) || v < limit.min || v > limit.max) {
      throw new MappingError("table-dtype", `table ${table.name}[${i}] = ${v} does not fit ${table.dtype}`);
    }
  });
}

/** A static index map. */
export const staticMap = (expr: Expr): IndexMap => ({ kind: "static", expr });

/**
 * A dynamic index map `table[index]`, the index simplified. Throws `index-out-of-bounds` when the ranges of `index`
 * allow a position outside `[0, table.length)` — the emitted load would read out of bounds.
 */
export function dynamicMap(table: LookupTable, index: Expr): IndexMap {
  checkIdentifier(table.name, "table name");
  checkSize(table.length, `length of table ${table.name}`);
  const b = bounds(index);
  if (b.min < 0 || b.max >= table.length) {
    throw new MappingError(
      "index-out-of-bounds",
      `index of table ${table.name} ranges over [${b.min}, ${b.max}] but the table has ${table.length} entries`,
    );
  }
  return { kind: "dynamic", table, index: simplify(index) };
}

/**
 * The value of `map` under `env`: the expression's value, or `table[index]` with the table's
 * values taken from `tables[name]` or else `table.values`. Throws `table-not-filled`,
 * `table-length`, `index-out-of-bounds`, and every error of `evaluate`.
 */
export function evaluateMap(map: IndexMap, env: Env, tables?: TableValues): number {
  if (map.kind === "static") return evaluate(map.expr, env);
  const { table } = map;
  const values = tables?.[table.name] ?? table.values;
  if (values === undefined) {
    throw new MappingError("table-not-filled", `table ${table.name} has no values; fill it with fillTable or pass them in tables`);
  }
  checkTableValues(table, values);
  const i = evaluate(map.index, env);
  if (i < 0 || i >= table.length) {
    throw new MappingError("index-out-of-bounds", `${table.name}[${i}] is outside [0, ${table.length})`);
  }
  return values[i] as number;
}

/**
 * `map` as Python: the expression, or `name[index]`. In the Triton dialect a table is a
 * pointer argument, so the text is `tl.load(name + index)`.
 */
export function mapToPython(map: IndexMap, options: PythonOptions = {}): string {
  if (map.kind === "static") return toPython(map.expr, options);
  const name = checkIdentifier(map.table.name, "table name");
  const index = toPython(map.index, options);
  return options.dialect === "triton" ? `tl.load(${name} + (${index}))` : `${name}[${index}]`;
}
