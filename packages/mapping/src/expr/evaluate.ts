// Evaluation of an expression under an assignment of its variables, with Python's floor
// division and modulo. Every value is checked: unknown or out-of-range variables, non-integer
// inputs, division by zero and overflow are typed errors.
import { MappingError } from "../errors.js";
import { addInt, ceilDivInt, floorDivInt, modInt, mulInt } from "./arith.js";
import type { Expr } from "./expr.js";

/** Values of variables by name. */
export type Env = Readonly<Record<string, number>>;

/**
 * The value of `e` under `env`. Floor division rounds toward -inf, `mod` has the divisor's
 * sign, `ceilDiv(a, b) = -((-a) // b)`. Throws `unknown-variable`, `out-of-range` (a value
 * outside the variable's declared range), `non-integer`, `division-by-zero` or `overflow`.
 */
export function evaluate(e: Expr, env: Env): number {
  switch (e.op) {
    case "const":
      return e.value;
    case "var": {
      if (!Object.hasOwn(env, e.name)) {
        throw new MappingError("unknown-variable", `no value given for variable ${e.name}`);
      }
      const v = env[e.name] as number;
      if (typeof v !== "number" || !Number.isInteger(v)) {
        throw new MappingError("non-integer", `variable ${e.name} = ${String(v)} is not an integer`);
      }
      if (v < e.range.min || v > e.range.max) {
        throw new MappingError("out-of-range", `variable ${e.name} = ${v} is outside its declared range [${e.range.min}, ${e.range.max}]`);
      }
      return v;
    }
    case "add":
      return e.args.reduce((acc, a) => addInt(acc, evaluate(a, env)), 0);
    case "mul":
      return e.args.reduce((acc, a) => mulInt(acc, evaluate(a, env)), 1);
    case "min":
      return Math.min(...operands(e.args, env));
    case "max":
      return Math.max(...operands(e.args, env));
    case "floorDiv":
      return floorDivInt(evaluate(e.dividend, env), evaluate(e.divisor, env));
    case "ceilDiv":
      return ceilDivInt(evaluate(e.dividend, env), evaluate(e.divisor, env));
    case "mod":
      return modInt(evaluate(e.dividend, env), evaluate(e.divisor, env));
    default:
      throw new MappingError("invalid-expression", `unknown expression node ${JSON.stringify(e)}`);
  }
}

function operands(args: readonly Expr[], env: Env): number[] {
  if (args.length === 0) throw new MappingError("invalid-expression", "min/max needs at least one operand");
  return args.map((a) => evaluate(a, env));
}
