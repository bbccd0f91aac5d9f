// Binding variables of an expression: a variable replaced by a value (an expression whose
// row count became known, say), and an expression compiled to a plain function for checks
// that evaluate it over many points.
import { MappingError } from "../errors.js";
import { constant, freeVariables, type Expr } from "./expr.js";
import { simplify } from "./simplify.js";
import { toTypeScript } from "./print.js";

/**
 * `e` with every variable named in `values` replaced by its value, simplified. Throws
 * `out-of-range` for a value outside the variable's declared range and `non-integer` for a
 * value that is not an integer.
 */
export function substitute(e: Expr, values: Readonly<Record<string, number>>): Expr {
  const walk = (x: Expr): Expr => {
    switch (x.op) {
      case "const":
        return x;
      case "var": {
        if (!Object.hasOwn(values, x.name)) return x;
        const v = values[x.name] as number;
        if (!Number.isInteger(v)) throw new MappingError("non-integer", `variable ${x.name} = ${String(v)} is not an integer`);
        if (v < x.range.min || v > x.range.max) {
          throw new MappingError(
            "out-of-range",
            `variable ${x.name} = ${v} is outside its declared range [${x.range.min}, ${x.range.max}]`,
          );
        }
        return constant(v);
      }
      case "add":
      case "mul":
      case "min":
      case "max":
        return { op: x.op, args: x.args.map(walk) };
      default:
        return { op: x.op, dividend: walk(x.dividend), divisor: walk(x.divisor) };
    }
  };
  return simplify(walk(e));
}

/**
 * `e` as a function of `variables` (in that order), for evaluating it at many points fast (a
 * check over every row count, say). Python semantics as {@link evaluate}, without its range
 * checks; a variable of `e` missing from `variables` throws `unknown-variable` here, once.
 */
export function toFunction(e: Expr, variables: readonly string[]): (...values: number[]) => number {
  const free = new Set<string>();
  for (const name of freeVariables(e)) free.add(name);
  const missing = [...free].find((v) => !variables.includes(v));
  if (missing !== undefined) throw new MappingError("unknown-variable", `no parameter for variable ${missing}`);
  // The text is the printer's output over validated identifiers and integers: nothing else reaches it.
  return new Function(...variables, `return ${toTypeScript(e)};`) as (...values: number[]) => number;
}
