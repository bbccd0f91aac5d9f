import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MappingError } from "../errors.js";
import { envArb, exprArb } from "../testing/expr-arbitraries.js";
import { ceilDivInt, floorDivInt, modInt } from "./arith.js";
import { evaluate } from "./evaluate.js";
import { add, ceilDiv, floorDiv, max, min, mod, mul, sub, variable, type Expr } from "./expr.js";
import { toPython } from "./print.js";
import { simplify } from "./simplify.js";

const x = variable("x", { min: 0, max: 7 });
const y = variable("y", { min: 0, max: 100 });
const n = variable("n", { min: -50, max: 50 });
const r = variable("rank", { min: 0, max: 4 });
const s = (e: Expr): string => toPython(simplify(e));

const outcome = (f: () => number): number | string => {
  try {
    return f();
  } catch (e) {
    if (e instanceof MappingError) return e.code;
    throw e;
  }
};

describe("simplify rules", () => {
  it("folds constants and combines like terms into a sorted affine form", () => {
    expect(s(add(3, mul(2, 5), -4))).toBe("9");
    expect(s(sub(add(x, y), x))).toBe("y");
    expect(s(add(mul(2, y), x, 1, mul(3, x), -1))).toBe("4 * x + 2 * y");
    expect(s(add(y, x))).toBe(s(add(x, y)));
    expect(s(mul(add(x, 1), add(x, -1)))).toBe("x * x - 1");
    expect(s(sub(mul(3, n), add(n, n, n)))).toBe("0");
    expect(s(variable("fixed", { min: 6, max: 6 }))).toBe("6");
  });

  it("uses ranges for floorDiv and mod", () => {
    expect(s(floorDiv(x, 8))).toBe("0");
    expect(s(mod(x, 8))).toBe("x");
    expect(s(floorDiv(add(mul(y, 8), x), 8))).toBe("y");
    expect(s(mod(add(mul(y, 8), x), 8))).toBe("x");
    expect(s(floorDiv(add(mul(y, 16), n), 8))).toBe("2 * y + n // 8");
    expect(s(mod(add(mul(y, 16), n, 19), 8))).toBe("(n + 3) % 8");
    expect(s(mod(sub(x, 1), 8))).toBe("(x + 7) % 8");
    expect(s(mod(add(x, 8), 8))).toBe("x");
    expect(s(floorDiv(add(x, 8), 8))).toBe("1");
    expect(s(floorDiv(floorDiv(y, 4), 2))).toBe("y // 8");
    expect(s(mod(mod(y, 12), 4))).toBe("y % 4");
    expect(s(floorDiv(add(mul(4, y), 2), 8))).toBe("(2 * y + 1) // 4");
    expect(s(mod(mul(4, y), 6))).toBe("2 * (2 * y % 3)");
    expect(s(floorDiv(y, -4))).toBe("-y // 4");
    expect(s(mod(y, -4))).toBe("-(-y % 4)");
    expect(s(ceilDiv(add(mul(4, y), 6), 8))).toBe("(-(-(2 * y + 3) // 4))");
    expect(s(ceilDiv(add(x, 1), 8))).toBe("1");
    expect(s(ceilDiv(x, 8))).toBe("(-(-x // 8))");
    expect(s(floorDiv(x, add(y, 8)))).toBe("0");
    expect(s(mod(x, add(y, 8)))).toBe("x");
  });

  it("drops min/max operands the ranges prove never win", () => {
    expect(s(min(x, add(x, 1), 9))).toBe("x");
    expect(s(max(x, add(x, 1), 9))).toBe("9");
    expect(s(min(min(y, 3), min(x, 5)))).toBe("min(x, y, 3)");
    expect(s(max(n, 0))).toBe("max(n, 0)");
    expect(s(min(add(mul(r, 4), 4), 20))).toBe("4 * rank + 4");
    expect(s(min(add(mul(r, 4), 4), 19))).toBe("min(4 * rank + 4, 19)");
  });

  it("throws division-by-zero when a divisor simplifies to 0", () => {
    expect(outcome(() => simplify({ op: "floorDiv", dividend: x, divisor: sub(y, y) }) as never)).toBe("division-by-zero");
    expect(outcome(() => simplify({ op: "mod", dividend: x, divisor: mul(0, y) }) as never)).toBe("division-by-zero");
  });
});

describe("simplify properties", () => {
  it("division primitives satisfy a = q*b + r with 0 <= r*sign(b) < |b| (BigInt check)", () => {
    const safe = fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER });
    fc.assert(
      fc.property(
        safe,
        safe.filter((b) => b !== 0),
        (a, b) => {
          const q = BigInt(floorDivInt(a, b));
          const rem = BigInt(modInt(a, b));
          const [A, B] = [BigInt(a), BigInt(b)];
          expect(q * B + rem).toBe(A);
          expect(b > 0 ? rem >= 0n && rem < B : rem <= 0n && rem > B).toBe(true);
          expect(ceilDivInt(a, b)).toBe(-floorDivInt(-a, b) + 0);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("preserves the value for every in-range assignment and is idempotent", () => {
    fc.assert(
      fc.property(exprArb(), fc.array(envArb(), { minLength: 1, maxLength: 4 }), (e, envs) => {
        const simplified = outcome(() => {
          const out = simplify(e);
          expect(simplify(out)).toEqual(out);
          for (const env of envs) {
            const before = outcome(() => evaluate(e, env));
            if (typeof before === "number") expect(evaluate(out, env)).toBe(before);
          }
          return 0;
        });
        // Simplify refuses only what evaluation refuses everywhere: a divisor that is always 0.
        if (simplified !== 0) {
          expect(simplified).toBe("division-by-zero");
          for (const env of envs) expect(outcome(() => evaluate(e, env))).toBe("division-by-zero");
        }
      }),
      { numRuns: 400 },
    );
  });
});
