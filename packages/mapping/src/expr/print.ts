// Printers from expressions to source text: Python (host code and Triton constexpr math),
// Triton jit tensor code, and TypeScript. Every name is re-validated and every literal checked
// before it is written, so no unvalidated text reaches emitted code.
import { MappingError, checkedInteger } from "../errors.js";
import { bounds } from "./bounds.js";
import type { DivExpr, Expr, NaryExpr } from "./expr.js";
import { checkIdentifier } from "./identifier.js";

/** Target of {@link toPython}: plain Python, or Triton jit code (`tl.minimum`, `tl.cdiv`). */
export type PythonDialect = "python" | "triton";

/** Options of {@link toPython}. */
export interface PythonOptions {
  /** `"python"` (default) or `"triton"`. */
  dialect?: PythonDialect;
}

// Binding strength of the text a node prints to: a child that binds more loosely than its
// position allows is parenthesised.
const ADD = 1;
const MUL = 2;
const ATOM = 3;

interface Printed {
  text: string;
  prec: number;
}

abstract class Printer {
  print(e: Expr): Printed {
    switch (e.op) {
      case "const": {
        if (!Number.isInteger(e.value)) throw new MappingError("non-integer", `constant ${e.value} is not an integer`);
        checkedInteger(e.value, "constant");
        return { text: e.value < 0 ? `(${e.value})` : String(e.value), prec: ATOM };
      }
      case "var":
        return { text: checkIdentifier(e.name), prec: ATOM };
      case "add":
        return this.sum(e.args);
      case "mul":
        return this.product(e.args);
      case "min":
      case "max":
        if (e.args.length === 0) throw new MappingError("invalid-expression", `${e.op} needs at least one operand`);
        if (e.args.length === 1) return this.print(e.args[0] as Expr);
        return this.extremum(
          e.op,
          e.args.map((a) => this.print(a).text),
        );
      case "floorDiv":
      case "ceilDiv":
      case "mod":
        return this.division(e);
      default:
        throw new MappingError("invalid-expression", `unknown expression node ${JSON.stringify(e)}`);
    }
  }

  protected wrap(p: Printed, min: number): string {
    return p.prec >= min ? p.text : `(${p.text})`;
  }

  private sum(args: readonly Expr[]): Printed {
    if (args.length === 0) return { text: "0", prec: ATOM };
    const parts: string[] = [];
    args.forEach((a, i) => {
      // `x + (-1) * y` reads as `x - y`: a negative leading coefficient becomes a minus sign.
      const neg = negated(a);
      if (i > 0 && neg) parts.push(" - ", this.wrap(this.print(neg), MUL));
      else parts.push(i > 0 ? " + " : "", this.wrap(this.print(a), ADD));
    });
    return { text: parts.join(""), prec: ADD };
  }

  private product(args: readonly Expr[]): Printed {
    if (args.length === 0) return { text: "1", prec: ATOM };
    const [head, ...rest] = args;
    if (head?.op === "const" && head.value === -1 && rest.length > 0) {
      // Unary minus binds tighter than * and // in both languages: -(x // 4) keeps its parens.
      const inner = rest.length === 1 ? this.print(rest[0] as Expr) : this.product(rest);
      return { text: `-${this.wrap(inner, ATOM)}`, prec: MUL };
    }
    // Integer * and // do not reassociate, so a right operand of equal strength is parenthesised.
    const text = args.map((a, i) => this.wrap(this.print(a), i === 0 ? MUL : ATOM)).join(" * ");
    return { text, prec: args.length === 1 ? this.print(args[0] as Expr).prec : MUL };
  }

  protected abstract extremum(op: NaryExpr["op"], args: string[]): Printed;
  protected abstract division(e: DivExpr): Printed;
}

function negated(e: Expr): Expr | undefined {
  if (e.op === "const" && e.value < 0) return { op: "const", value: -e.value };
  if (e.op === "mul" && e.args.length >= 2 && e.args[0]?.op === "const" && e.args[0].value < 0) {
    const c = -e.args[0].value;
    const rest = e.args.slice(1);
    return c === 1
      ? rest.length === 1
        ? (rest[0] as Expr)
        : { op: "mul", args: rest }
      : { op: "mul", args: [{ op: "const", value: c }, ...rest] };
  }
  return undefined;
}

class PythonPrinter extends Printer {
  protected extremum(op: NaryExpr["op"], args: string[]): Printed {
    return { text: `${op}(${args.join(", ")})`, prec: ATOM };
  }

  protected division(e: DivExpr): Printed {
    const a = this.print(e.dividend);
    const b = this.print(e.divisor);
    if (e.op === "ceilDiv") return { text: `(-(-${this.wrap(a, ATOM)} // ${this.wrap(b, ATOM)}))`, prec: ATOM };
    return { text: `${this.wrap(a, MUL)} ${e.op === "mod" ? "%" : "//"} ${this.wrap(b, ATOM)}`, prec: MUL };
  }
}

class TritonPrinter extends PythonPrinter {
  protected override extremum(op: NaryExpr["op"], args: string[]): Printed {
    const fn = op === "min" ? "tl.minimum" : "tl.maximum";
    const text = args.reduceRight((acc, a) => `${fn}(${a}, ${acc})`);
    return { text, prec: ATOM };
  }

  protected override division(e: DivExpr): Printed {
    // Triton's integer // and % truncate toward zero (triton-lang/triton#619) and tl.cdiv is
    // (a + b - 1) // b, so they agree with floor semantics only for a >= 0 and b > 0.
    const a = bounds(e.dividend);
    const b = bounds(e.divisor);
    if (a.min < 0 || b.min <= 0) {
      throw new MappingError(
        "unsupported-dialect",
        `Triton integer ${e.op} truncates toward zero; the dividend's range [${a.min}, ${a.max}] must be >= 0 and the divisor's [${b.min}, ${b.max}] > 0 (narrow the variable ranges or use dialect "python")`,
      );
    }
    if (e.op === "ceilDiv") return { text: `tl.cdiv(${this.print(e.dividend).text}, ${this.print(e.divisor).text})`, prec: ATOM };
    return super.division(e);
  }
}

class TypeScriptPrinter extends Printer {
  protected extremum(op: NaryExpr["op"], args: string[]): Printed {
    return { text: `Math.${op}(${args.join(", ")})`, prec: ATOM };
  }

  protected division(e: DivExpr): Printed {
    const a = this.print(e.dividend).text;
    const b = this.print(e.divisor).text;
    if (e.op === "mod") return { text: `((${a}) % (${b}) + (${b})) % (${b})`, prec: MUL };
    // For safe integers the rounded quotient never crosses an integer, so floor/ceil are exact.
    return { text: `Math.${e.op === "floorDiv" ? "floor" : "ceil"}((${a}) / (${b}))`, prec: ATOM };
  }
}

/**
 * `e` as a Python expression: `//` and `%` (Python's floor semantics), `-(-a // b)` for ceil
 * division, `min(a, b)`/`max(a, b)`. With `{ dialect: "triton" }` the text is for `@triton.jit`
 * code: `tl.minimum`/`tl.maximum` and `tl.cdiv`; because Triton's integer division truncates,
 * it throws `unsupported-dialect` unless ranges prove dividends >= 0 and divisors > 0.
 */
export function toPython(e: Expr, options: PythonOptions = {}): string {
  const printer = options.dialect === "triton" ? new TritonPrinter() : new PythonPrinter();
  return printer.print(e).text;
}

/**
 * `e` as a TypeScript expression with exact Python semantics on safe integers:
 * `Math.floor(a / b)`, `Math.ceil(a / b)`, `((a % b) + b) % b` for modulo, `Math.min`/`Math.max`.
 * (A zero result may print as `-0`, which `===` 0.)
 */
export function toTypeScript(e: Expr): string {
  return new TypeScriptPrinter().print(e).text;
}
