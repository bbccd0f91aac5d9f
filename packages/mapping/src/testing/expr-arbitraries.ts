// fast-check generators of random expressions and in-range assignments, shared by the
// property tests of the simplifier, the printers and the analyses. Not part of the public API.
import fc from "fast-check";
import { execFileSync } from "node:child_process";
import { add, ceilDiv, constant, floorDiv, max, min, mod, mul, sub, variable, type Expr, type VarExpr } from "../expr/expr.js";

/** Variables with ranges that include negatives, zero and one-point ranges. */
export const VARS: readonly VarExpr[] = [
  variable("x", { min: -5, max: 12 }),
  variable("y", { min: 0, max: 20 }),
  variable("z", { min: -8, max: -1 }),
  variable("w", { min: 0, max: 3 }),
  variable("tile", { min: 0, max: 63 }),
  variable("rank", { min: 0, max: 6 }),
  variable("one", { min: 4, max: 4 }),
];

/** Non-negative variables only (for the Triton dialect, whose division truncates). */
export const NON_NEGATIVE_VARS: readonly VarExpr[] = VARS.filter((v) => v.range.min >= 0);

const nonZero = fc.integer({ min: -9, max: 9 }).filter((n) => n !== 0);

/** Random expressions over `vars`, nested up to `depth` levels. */
export function exprArb(vars: readonly VarExpr[] = VARS, depth = 4, positiveDivisors = false): fc.Arbitrary<Expr> {
  const divisor = positiveDivisors ? fc.integer({ min: 1, max: 9 }) : nonZero;
  const { expr } = fc.letrec<{ expr: Expr; leaf: Expr }>((tie) => ({
    leaf: fc.oneof(
      fc.integer({ min: -12, max: 12 }).map((n) => constant(positiveDivisors ? Math.abs(n) : n)),
      fc.constantFrom(...vars),
    ),
    expr: fc.oneof(
      { depthSize: "small", maxDepth: depth },
      { arbitrary: tie("leaf"), weight: 3 },
      fc.array(tie("expr"), { minLength: 2, maxLength: 3 }).map((xs) => add(...xs)),
      fc.tuple(tie("expr"), tie("expr")).map(([a, b]) => (positiveDivisors ? add(a, b) : sub(a, b))),
      fc.tuple(tie("expr"), tie("expr")).map(([a, b]) => mul(a, b)),
      fc.tuple(tie("expr"), fc.integer({ min: positiveDivisors ? 1 : -3, max: 9 })).map(([a, k]) => mul(k, a)),
      fc.tuple(tie("expr"), divisor).map(([a, c]) => floorDiv(a, c)),
      fc.tuple(tie("expr"), divisor).map(([a, c]) => ceilDiv(a, c)),
      fc.tuple(tie("expr"), divisor).map(([a, c]) => mod(a, c)),
      // Built as raw nodes: a divisor that is the literal 0 must reach evaluation and simplify.
      fc.tuple(tie("expr"), tie("expr")).map(([a, b]): Expr => ({ op: "floorDiv", dividend: a, divisor: b })),
      fc.tuple(tie("expr"), tie("expr")).map(([a, b]): Expr => ({ op: "mod", dividend: a, divisor: b })),
      // A tile id split into (block, offset) and recombined, as the collective maps do.
      fc
        .tuple(tie("expr"), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 3 }))
        .map(([e, c, k, j]) => add(mul(c * k, floorDiv(e, c)), mul(k, mod(e, c)), floorDiv(mod(e, c * j), c))),
      fc.array(tie("expr"), { minLength: 1, maxLength: 3 }).map((xs) => min(...xs)),
      fc.array(tie("expr"), { minLength: 1, maxLength: 3 }).map((xs) => max(...xs)),
    ),
  }));
  return expr;
}

/** An assignment of every variable in `vars` to a value inside its range. */
export function envArb(vars: readonly VarExpr[] = VARS): fc.Arbitrary<Record<string, number>> {
  return fc.record(Object.fromEntries(vars.map((v) => [v.name, fc.integer(v.range)])));
}

/** Evaluates `cases` in one python3 process; `"ZeroDivisionError"` where Python raised it. */
export function evalPython(cases: ReadonlyArray<{ src: string; env: Record<string, number> }>): Array<number | string> {
  const script = [
    "import json, sys, types",
    "tl = types.SimpleNamespace(minimum=min, maximum=max, cdiv=lambda a, b: (a + b - 1) // b)",
    "out = []",
    "for c in json.load(sys.stdin):",
    "    try:",
    "        out.append(eval(c['src'], {'__builtins__': {'min': min, 'max': max}, 'tl': tl}, c['env']))",
    "    except ZeroDivisionError:",
    "        out.append('ZeroDivisionError')",
    "print(json.dumps(out))",
  ].join("\n");
  const stdout = execFileSync("python3", ["-c", script], { input: JSON.stringify(cases), encoding: "utf8" });
  return JSON.parse(stdout) as Array<number | string>;
}
