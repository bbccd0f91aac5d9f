import { describe, expect, it } from "vitest";
import { MappingError } from "../errors.js";
import {
  ExprSchema,
  add,
  ceilDiv,
  constant,
  floorDiv,
  freeVariables,
  max,
  min,
  mod,
  mul,
  parseExpr,
  sub,
  variable,
  variableRanges,
} from "./expr.js";
import { evaluate } from "./evaluate.js";
import { bounds } from "./bounds.js";
import { ceilDivInt, floorDivInt, modInt } from "./arith.js";
import { z } from "zod";

const code = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    if (e instanceof MappingError) return e.code;
    throw e;
  }
  return undefined;
};

const x = variable("x", { min: -5, max: 12 });
const y = variable("y", { min: 1, max: 4 });

describe("builders", () => {
  it("build plain JSON nodes", () => {
    expect(sub(x, 3)).toEqual({
      op: "add",
      args: [
        x,
        {
          op: "mul",
          args: [
            { op: "const", value: -1 },
            { op: "const", value: 3 },
          ],
        },
      ],
    });
    expect(floorDiv(x, y)).toEqual({ op: "floorDiv", dividend: x, divisor: y });
    expect(JSON.parse(JSON.stringify(mul(add(x, 1), min(x, y))))).toEqual(mul(add(x, 1), min(x, y)));
  });

  it("reject bad identifiers, ranges, literals and zero divisors with typed errors", () => {
    expect(code(() => variable("1x", { min: 0, max: 1 }))).toBe("invalid-identifier");
    expect(code(() => variable("lambda", { min: 0, max: 1 }))).toBe("invalid-identifier");
    expect(code(() => variable("new", { min: 0, max: 1 }))).toBe("invalid-identifier");
    // Soft keywords too: `type` (3.12) is refused here as in every emitter's check.
    for (const soft of ["match", "case", "type", "_"]) expect(code(() => variable(soft, { min: 0, max: 1 }))).toBe("invalid-identifier");
    expect(code(() => variable("a-b", { min: 0, max: 1 }))).toBe("invalid-identifier");
    expect(code(() => variable("x", { min: 2, max: 1 }))).toBe("invalid-range");
    expect(code(() => variable("x", { min: 0, max: 2 ** 60 }))).toBe("invalid-range");
    expect(code(() => constant(1.5))).toBe("non-integer");
    expect(code(() => constant(2 ** 54))).toBe("overflow");
    expect(code(() => floorDiv(x, 0))).toBe("division-by-zero");
    expect(code(() => ceilDiv(x, 0))).toBe("division-by-zero");
    expect(code(() => mod(x, 0))).toBe("division-by-zero");
    expect(code(() => add())).toBe("invalid-expression");
    expect(code(() => max())).toBe("invalid-expression");
  });

  it("collect free variables and reject one name with two ranges", () => {
    expect(freeVariables(add(y, mul(x, y), 3))).toEqual(["x", "y"]);
    expect(freeVariables(constant(3))).toEqual([]);
    const x2 = variable("x", { min: 0, max: 3 });
    expect(code(() => variableRanges(add(x, x2)))).toBe("inconsistent-variable");
  });
});

describe("ExprSchema", () => {
  it("accepts built expressions and rejects malformed data", () => {
    const e = ceilDiv(add(mul(2, x), y), max(y, 2));
    expect(parseExpr(JSON.parse(JSON.stringify(e)))).toEqual(e);
    expect(code(() => parseExpr({ op: "var", name: "import", range: { min: 0, max: 1 } }))).toBe("invalid-expression");
    expect(code(() => parseExpr({ op: "const", value: 0.5 }))).toBe("invalid-expression");
    expect(code(() => parseExpr({ op: "add", args: [] }))).toBe("invalid-expression");
    expect(code(() => parseExpr({ op: "pow", args: [x] }))).toBe("invalid-expression");
    expect(code(() => parseExpr({ op: "var", name: "x", range: { min: 3, max: 1 } }))).toBe("invalid-expression");
  });

  it("exports a JSON Schema", () => {
    const schema = z.toJSONSchema(ExprSchema) as Record<string, unknown>;
    expect(JSON.stringify(schema)).toContain("floorDiv");
  });
});

describe("evaluate", () => {
  it("uses Python floor division and modulo for every sign combination", () => {
    // Values of Python's a // b, a % b and -(-a // b).
    const cases: Array<[number, number, number, number, number]> = [
      [7, 2, 3, 1, 4],
      [-7, 2, -4, 1, -3],
      [7, -2, -4, -1, -3],
      [-7, -2, 3, -1, 4],
      [6, 3, 2, 0, 2],
      [-6, 3, -2, 0, -2],
      [0, -5, 0, 0, 0],
      [1, 7, 0, 1, 1],
      [-1, 7, -1, 6, 0],
    ];
    for (const [a, b, q, r, c] of cases) {
      expect([floorDivInt(a, b), modInt(a, b), ceilDivInt(a, b)]).toEqual([q, r, c]);
      expect(evaluate(floorDiv(a, b), {})).toBe(q);
      expect(evaluate(mod(a, b), {})).toBe(r);
      expect(evaluate(ceilDiv(a, b), {})).toBe(c);
    }
  });

  it("is exact near the safe-integer limit", () => {
    const big = Number.MAX_SAFE_INTEGER;
    expect(floorDivInt(big, 3)).toBe(3002399751580330);
    expect(modInt(big, 3)).toBe(1);
    expect(floorDivInt(-big, 7)).toBe(-1286742750677285);
    expect(modInt(-big, 7)).toBe(4);
    expect(ceilDivInt(-big, 2)).toBe(-4503599627370495);
  });

  it("evaluates variables, min and max", () => {
    expect(evaluate(add(mul(3, x), min(x, y), max(y, 2)), { x: -2, y: 3 })).toBe(-6 - 2 + 3);
  });

  it("reports unknown, out-of-range and non-integer variables, zero divisors and overflow", () => {
    expect(code(() => evaluate(add(x, y), { x: 1 }))).toBe("unknown-variable");
    expect(code(() => evaluate(x, { x: 13 }))).toBe("out-of-range");
    expect(code(() => evaluate(x, { x: -6 }))).toBe("out-of-range");
    expect(code(() => evaluate(x, { x: 1.5 }))).toBe("non-integer");
    expect(code(() => evaluate(x, { x: Number.NaN }))).toBe("non-integer");
    const z0 = variable("z", { min: -1, max: 1 });
    expect(code(() => evaluate(floorDiv(x, z0), { x: 3, z: 0 }))).toBe("division-by-zero");
    expect(code(() => evaluate(mod(x, z0), { x: 3, z: 0 }))).toBe("division-by-zero");
    const huge = variable("h", { min: 0, max: 2 ** 52 });
    expect(code(() => evaluate(mul(huge, huge), { h: 2 ** 52 }))).toBe("overflow");
    expect(code(() => evaluate(add(huge, huge, huge), { h: 2 ** 52 }))).toBe("overflow");
  });
});

describe("bounds", () => {
  it("is exact on affine forms and sound on the rest", () => {
    expect(bounds(add(mul(2, x), -1))).toEqual({ min: -11, max: 23 });
    expect(bounds(mul(x, x))).toEqual({ min: 0, max: 144 });
    expect(bounds(floorDiv(x, 4))).toEqual({ min: -2, max: 3 });
    expect(bounds(mod(x, 4))).toEqual({ min: 0, max: 3 });
    expect(bounds(mod(y, 8))).toEqual({ min: 1, max: 4 });
    expect(bounds(floorDiv(x, y))).toEqual({ min: -5, max: 12 });
    expect(bounds(min(x, y))).toEqual({ min: -5, max: 4 });
  });

  it("reports overflow and divisors that can only be zero", () => {
    const huge = variable("h", { min: 0, max: 2 ** 52 });
    expect(code(() => bounds(mul(huge, huge)))).toBe("overflow");
    const zero = variable("z", { min: 0, max: 0 });
    expect(code(() => bounds(floorDiv(x, zero)))).toBe("division-by-zero");
  });
});
