// Index expressions of CommIR: how a logical axis's value is computed from loop variables
// after tile (j = j0·f + j1), join (i = ij div J, j = ij mod J) and shift (j → (j + i) mod J).
import { FrontendError } from "../errors.js";

/** An integer expression over loop variables. */
export type IndexExpr =
  | { readonly kind: "var"; readonly name: string }
  | { readonly kind: "add"; readonly a: IndexExpr; readonly b: IndexExpr }
  | { readonly kind: "mul"; readonly a: IndexExpr; readonly k: number }
  | { readonly kind: "div"; readonly a: IndexExpr; readonly k: number }
  | { readonly kind: "mod"; readonly a: IndexExpr; readonly k: number };

/** The loop variable `name`. */
export const v = (name: string): IndexExpr => ({ kind: "var", name });
/** `a + b`. */
export const add = (a: IndexExpr, b: IndexExpr): IndexExpr => ({ kind: "add", a, b });
/** `a · k`. */
export const mul = (a: IndexExpr, k: number): IndexExpr => ({ kind: "mul", a, k });
/** `floor(a / k)`. */
export const div = (a: IndexExpr, k: number): IndexExpr => ({ kind: "div", a, k });
/** `a mod k`, always in `[0, k)`. */
export const mod = (a: IndexExpr, k: number): IndexExpr => ({ kind: "mod", a, k });

/** Evaluates `e` with loop variable values `env` (every variable must be bound). */
export function evalExpr(e: IndexExpr, env: Readonly<Record<string, number>>): number {
  switch (e.kind) {
    case "var": {
      const x = env[e.name];
      if (x === undefined) throw new FrontendError("unknown-axis", `loop variable ${e.name} is not bound here`);
      return x;
    }
    case "add":
      return evalExpr(e.a, env) + evalExpr(e.b, env);
    case "mul":
      return evalExpr(e.a, env) * e.k;
    case "div":
      return Math.floor(evalExpr(e.a, env) / e.k);
    case "mod": {
      const x = evalExpr(e.a, env);
      return ((x % e.k) + e.k) % e.k;
    }
  }
}

/** `e` with every occurrence of variable `name` replaced by `by`. */
export function substitute(e: IndexExpr, name: string, by: IndexExpr): IndexExpr {
  switch (e.kind) {
    case "var":
      return e.name === name ? by : e;
    case "add":
      return add(substitute(e.a, name, by), substitute(e.b, name, by));
    default:
      return { ...e, a: substitute(e.a, name, by) };
  }
}

/** The loop variables `e` reads. */
export function exprVars(e: IndexExpr, out = new Set<string>()): Set<string> {
  if (e.kind === "var") out.add(e.name);
  else if (e.kind === "add") {
    exprVars(e.a, out);
    exprVars(e.b, out);
  } else exprVars(e.a, out);
  return out;
}

/** Prints `e` in the paper's notation, e.g. `(j0 + i0) % 4 * 16 + j1`. */
export function formatExpr(e: IndexExpr): string {
  switch (e.kind) {
    case "var":
      return e.name;
    case "add":
      return `${formatExpr(e.a)} + ${formatExpr(e.b)}`;
    case "mul":
      return `${wrap(e.a)} * ${e.k}`;
    case "div":
      return `${wrap(e.a)} // ${e.k}`;
    case "mod":
      return `${wrap(e.a)} % ${e.k}`;
  }
}

function wrap(e: IndexExpr): string {
  return e.kind === "add" ? `(${formatExpr(e)})` : formatExpr(e);
}
