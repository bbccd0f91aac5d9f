// The symbolic integer expressions that static tile mappings are written in (TileLink §4.1:
// "f_S, f_R, f_C are affine"): plain JSON nodes with an `op` discriminant, a zod schema for
// them, and builders that validate as they build.
import { z } from "zod";
import { MappingError, checkedInteger } from "../errors.js";
import { checkIdentifier, isValidIdentifier } from "./identifier.js";

/** Inclusive integer interval `[min, max]`. */
export interface Range {
  min: number;
  max: number;
}

/** An integer literal (a safe integer). */
export interface ConstExpr {
  op: "const";
  value: number;
}
/** A variable with its declared inclusive range; the range travels with every occurrence. */
export interface VarExpr {
  op: "var";
  name: string;
  range: Range;
}
/** Sum, product, minimum or maximum of one or more operands. */
export interface NaryExpr {
  op: "add" | "mul" | "min" | "max";
  args: Expr[];
}
/** Floor division, ceiling division or modulo (Python semantics: floor toward -inf). */
export interface DivExpr {
  op: "floorDiv" | "ceilDiv" | "mod";
  dividend: Expr;
  divisor: Expr;
}

/** A symbolic integer expression: plain, serialisable data discriminated by `op`. */
export type Expr = ConstExpr | VarExpr | NaryExpr | DivExpr;

const RangeSchema = z.object({ min: z.int(), max: z.int() }).refine((r) => r.min <= r.max, { message: "range.min must be <= range.max" });

/** zod schema of {@link Expr}; safe integers, valid identifiers, non-empty operand lists. */
export const ExprSchema: z.ZodType<Expr> = z.lazy(() =>
  z.discriminatedUnion("op", [
    z.object({ op: z.literal("const"), value: z.int() }),
    z.object({
      op: z.literal("var"),
      name: z.string().refine(isValidIdentifier, { message: "invalid variable name" }),
      range: RangeSchema,
    }),
    z.object({ op: z.enum(["add", "mul", "min", "max"]), args: z.array(ExprSchema).min(1) }),
    z.object({ op: z.enum(["floorDiv", "ceilDiv", "mod"]), dividend: ExprSchema, divisor: ExprSchema }),
  ]),
);

/** Validates unknown data as an {@link Expr}; throws `invalid-expression` naming the first issue. */
export function parseExpr(data: unknown): Expr {
  const r = ExprSchema.safeParse(data);
  if (!r.success) {
    const issue = r.error.issues[0];
    const where = issue ? issue.path.join(".") || "(root)" : "(root)";
    throw new MappingError("invalid-expression", `not an expression at ${where}: ${issue?.message ?? "invalid"}`);
  }
  return r.data;
}

/** An operand of a builder: an expression or an integer literal. */
export type ExprLike = Expr | number;

/** Lifts a number to a constant node, checking it is a safe integer. */
export function toExpr(x: ExprLike): Expr {
  if (typeof x === "number") return constant(x);
  return x;
}

/** `n` as an expression; throws `non-integer` / `overflow` for a non-integer or unsafe value. */
export function constant(n: number): ConstExpr {
  if (!Number.isInteger(n)) throw new MappingError("non-integer", `constant ${n} is not an integer`);
  return { op: "const", value: checkedInteger(n, "constant") };
}

/** A variable ranging over the inclusive `range`, e.g. `variable("tile", { min: 0, max: 15 })`. */
export function variable(name: string, range: Range): VarExpr {
  checkIdentifier(name);
  checkRange(range, name);
  return { op: "var", name, range: { min: range.min, max: range.max } };
}

/** Throws `invalid-range` unless `range` is a safe-integer interval with min <= max. */
export function checkRange(range: Range, name: string): void {
  if (!Number.isSafeInteger(range.min) || !Number.isSafeInteger(range.max) || range.min > range.max) {
    throw new MappingError("invalid-range", `range of ${name} must be safe integers with min <= max, got [${range.min}, ${range.max}]`);
  }
}

function nary(op: NaryExpr["op"], xs: ExprLike[]): NaryExpr {
  if (xs.length === 0) throw new MappingError("invalid-expression", `${op}() needs at least one operand`);
  return { op, args: xs.map(toExpr) };
}

function div(op: DivExpr["op"], a: ExprLike, b: ExprLike): DivExpr {
  const divisor = toExpr(b);
  if (divisor.op === "const" && divisor.value === 0) {
    throw new MappingError("division-by-zero", `${op} by the constant 0`);
  }
  return { op, dividend: toExpr(a), divisor };
}

/** Sum of the operands. */
export const add = (...xs: ExprLike[]): NaryExpr => nary("add", xs);
/** `a - b`, built as `a + (-1) * b`. */
export const sub = (a: ExprLike, b: ExprLike): NaryExpr => nary("add", [a, nary("mul", [-1, b])]);
/** Product of the operands. */
export const mul = (...xs: ExprLike[]): NaryExpr => nary("mul", xs);
/** Minimum of the operands. */
export const min = (...xs: ExprLike[]): NaryExpr => nary("min", xs);
/** Maximum of the operands. */
export const max = (...xs: ExprLike[]): NaryExpr => nary("max", xs);
/** `floor(a / b)` (Python `a // b`). Throws `division-by-zero` for a literal zero divisor. */
export const floorDiv = (a: ExprLike, b: ExprLike): DivExpr => div("floorDiv", a, b);
/** `ceil(a / b)` (`-((-a) // b)`). Throws `division-by-zero` for a literal zero divisor. */
export const ceilDiv = (a: ExprLike, b: ExprLike): DivExpr => div("ceilDiv", a, b);
/** `a mod b` with the divisor's sign (Python `a % b`). Throws `division-by-zero` for a literal zero. */
export const mod = (a: ExprLike, b: ExprLike): DivExpr => div("mod", a, b);

/**
 * Collects the variables of `e` with their ranges; throws `inconsistent-variable` when one
 * name carries two different ranges (the range must be the same at every occurrence).
 */
export function variableRanges(e: Expr, into: Map<string, Range> = new Map()): Map<string, Range> {
  const stack: Expr[] = [e];
  while (stack.length > 0) {
    const n = stack.pop() as Expr;
    switch (n.op) {
      case "const":
        break;
      case "var": {
        const seen = into.get(n.name);
        if (seen === undefined) into.set(n.name, n.range);
        else if (seen.min !== n.range.min || seen.max !== n.range.max) {
          throw new MappingError(
            "inconsistent-variable",
            `variable ${n.name} appears with ranges [${seen.min}, ${seen.max}] and [${n.range.min}, ${n.range.max}]; use one range per name`,
          );
        }
        break;
      }
      case "add":
      case "mul":
      case "min":
      case "max":
        for (const a of n.args) stack.push(a);
        break;
      default:
        stack.push(n.dividend, n.divisor);
    }
  }
  return into;
}

/** Names of the variables of `e`, sorted. */
export function freeVariables(e: Expr): string[] {
  return [...variableRanges(e).keys()].sort();
}
