import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MappingError } from "../errors.js";
import { envArb, evalPython, exprArb, NON_NEGATIVE_VARS, VARS } from "../testing/expr-arbitraries.js";
import { evaluate, type Env } from "./evaluate.js";
import { add, ceilDiv, floorDiv, max, min, mod, mul, sub, variable, type Expr } from "./expr.js";
import { toPython, toTypeScript } from "./print.js";
import { simplify } from "./simplify.js";

const tile = variable("tile", { min: 0, max: 47 });
const rank = variable("rank", { min: 0, max: 5 });
const n = variable("n", { min: -9, max: 9 });

const outcome = (f: () => number): number | string => {
  try {
    return f();
  } catch (e) {
    if (e instanceof MappingError && e.code === "division-by-zero") return "ZeroDivisionError";
    throw e;
  }
};

function runTypeScript(e: Expr, env: Env): number | string {
  const names = Object.keys(env);
  // The printed text is compiled exactly as a user would embed it.
  const f = new Function(...names, `"use strict"; return (${toTypeScript(e)});`) as (...xs: number[]) => number;
  const v = f(...names.map((k) => env[k] as number));
  return Number.isFinite(v) ? v + 0 : "ZeroDivisionError";
}

describe("printed text", () => {
  it("prints Python with precedence-aware parentheses", () => {
    const e = add(mul(4, floorDiv(tile, 6)), mul(2, mod(floorDiv(tile, 3), 2)));
    expect(toPython(e)).toMatchInlineSnapshot(`"4 * (tile // 6) + 2 * (tile // 3 % 2)"`);
    expect(toPython(sub(tile, mul(2, rank)))).toMatchInlineSnapshot(`"tile - 2 * rank"`);
    expect(toPython(simplify(sub(tile, mul(2, rank))))).toMatchInlineSnapshot(`"(-2) * rank + tile"`);
    expect(toPython(mod(add(tile, rank), 6))).toMatchInlineSnapshot(`"(tile + rank) % 6"`);
    expect(toPython(floorDiv(tile, mul(rank, 2)))).toMatchInlineSnapshot(`"tile // (rank * 2)"`);
    expect(toPython(mul(tile, floorDiv(rank, 2)))).toMatchInlineSnapshot(`"tile * (rank // 2)"`);
    expect(toPython(ceilDiv(sub(tile, 3), rank))).toMatchInlineSnapshot(`"(-(-(tile - 3) // rank))"`);
    expect(toPython(min(add(tile, 1), 40, max(rank, 2)))).toMatchInlineSnapshot(`"min(tile + 1, 40, max(rank, 2))"`);
    expect(toPython(add(n, -3))).toMatchInlineSnapshot(`"n - 3"`);
    expect(toPython(mul(-2, n))).toMatchInlineSnapshot(`"(-2) * n"`);
  });

  it("prints Triton with tl.minimum/tl.maximum and tl.cdiv", () => {
    const e = min(mul(ceilDiv(add(tile, 1), 4), 8), max(rank, 3), 100);
    expect(toPython(e, { dialect: "triton" })).toBe("tl.minimum(tl.cdiv(tile + 1, 4) * 8, tl.minimum(tl.maximum(rank, 3), 100))");
    expect(toPython(mod(add(tile, rank), 6), { dialect: "triton" })).toBe("(tile + rank) % 6");
  });

  it("refuses Triton division whose operands may be negative (Triton truncates)", () => {
    const err = (() => {
      try {
        toPython(floorDiv(n, 4), { dialect: "triton" });
      } catch (e) {
        return e as MappingError;
      }
      return undefined;
    })();
    expect(err?.code).toBe("unsupported-dialect");
    expect(err?.message).toContain("[-9, 9]");
    expect(() => toPython(mod(tile, n), { dialect: "triton" })).toThrow(MappingError);
  });

  it("prints TypeScript with exact floor semantics", () => {
    expect(toTypeScript(mod(add(tile, rank), 6))).toMatchInlineSnapshot(`"((tile + rank) % (6) + (6)) % (6)"`);
    expect(toTypeScript(floorDiv(n, 4))).toMatchInlineSnapshot(`"Math.floor((n) / (4))"`);
    expect(toTypeScript(min(n, 3, tile))).toMatchInlineSnapshot(`"Math.min(n, 3, tile)"`);
  });

  it("never prints unvalidated names or literals", () => {
    const bad = { op: "var", name: "x); import os; (", range: { min: 0, max: 1 } } as Expr;
    expect(() => toPython(bad)).toThrow(/is not usable/);
    expect(() => toTypeScript(bad)).toThrow(MappingError);
    expect(() => toPython({ op: "const", value: 0.5 })).toThrow(MappingError);
    expect(() => toPython({ op: "const", value: 2 ** 60 })).toThrow(MappingError);
    expect(() => toPython({ op: "min", args: [] })).toThrow(MappingError);
  });
});

describe("printed text evaluates like evaluate()", () => {
  const cases = fc.sample(fc.tuple(exprArb(VARS, 5), envArb(VARS)), { numRuns: 400, seed: 42 });

  it("Python (one python3 process, raw and simplified forms, negative operands included)", () => {
    const batch = cases.flatMap(([e, env]) => {
      const simplified = (() => {
        try {
          return simplify(e);
        } catch (err) {
          expect((err as MappingError).code).toBe("division-by-zero");
          return e;
        }
      })();
      return [e, simplified].map((x) => ({ src: toPython(x), env, expected: outcome(() => evaluate(x, env)) }));
    });
    const got = evalPython(batch.map(({ src, env }) => ({ src, env })));
    expect(got).toHaveLength(batch.length);
    batch.forEach((c, i) => expect({ src: c.src, env: c.env, value: got[i] }).toEqual({ src: c.src, env: c.env, value: c.expected }));
    expect(batch.some((c) => typeof c.expected === "number" && c.expected < 0 && c.src.includes("%"))).toBe(true);
  });

  it("Triton dialect text, where printable, agrees in Python with tl emulated", () => {
    const tritonCases = fc.sample(fc.tuple(exprArb(NON_NEGATIVE_VARS, 4, true), envArb(NON_NEGATIVE_VARS)), { numRuns: 300, seed: 9 });
    const batch = tritonCases.flatMap(([e, env]) => {
      try {
        return [{ src: toPython(e, { dialect: "triton" }), env, expected: outcome(() => evaluate(e, env)) }];
      } catch (err) {
        // A divisor whose range is {0} is refused before the sign check.
        expect(["unsupported-dialect", "division-by-zero"]).toContain((err as MappingError).code);
        return [];
      }
    });
    expect(batch.length).toBeGreaterThan(100);
    expect(batch.some((c) => c.src.includes("tl.cdiv"))).toBe(true);
    const got = evalPython(batch.map(({ src, env }) => ({ src, env })));
    batch.forEach((c, i) => expect({ src: c.src, value: got[i] }).toEqual({ src: c.src, value: c.expected }));
  });

  it("TypeScript through new Function", () => {
    for (const [e, env] of cases) {
      let simplified = e;
      try {
        simplified = simplify(e);
      } catch (err) {
        expect((err as MappingError).code).toBe("division-by-zero");
      }
      for (const x of [e, simplified]) {
        const expected = outcome(() => evaluate(x, env));
        if (typeof expected === "number") expect(runTypeScript(x, env)).toBe(expected);
      }
    }
  });
});
