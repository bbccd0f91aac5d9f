import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MappingError } from "../errors.js";
import { evaluate } from "./evaluate.js";
import { add, floorDiv, mod, variable } from "./expr.js";
import { substitute, toFunction } from "./substitute.js";
import { envArb, exprArb, VARS } from "../testing/expr-arbitraries.js";

const names = VARS.map((v) => v.name);

describe("substitute", () => {
  it("replaces a variable by its value and simplifies", () => {
    const M = variable("M", { min: 8, max: 1024 });
    const r = variable("r", { min: 0, max: 3 });
    expect(evaluate(substitute(add(floorDiv(M, 4), r), { M: 256 }), { r: 3 })).toBe(67);
    expect(substitute(floorDiv(M, 4), { M: 256 })).toEqual({ op: "const", value: 64 });
  });

  it("refuses a value outside the variable's range, naming it", () => {
    const M = variable("M", { min: 8, max: 1024 });
    expect(() => substitute(mod(M, 3), { M: 4 })).toThrow(MappingError);
    expect(() => substitute(mod(M, 3), { M: 4 })).toThrow(/M = 4 is outside/);
  });

  it("property: substituting some variables then evaluating equals evaluating at once", () => {
    fc.assert(
      fc.property(exprArb(), envArb(), fc.subarray(names), (e, env, bound) => {
        let want: number;
        try {
          want = evaluate(e, env);
        } catch {
          return; // division by zero or overflow at this point: nothing to compare
        }
        const some = Object.fromEntries(bound.map((n) => [n, env[n] as number]));
        expect(evaluate(substitute(e, some), env)).toBe(want);
      }),
    );
  });
});

describe("toFunction", () => {
  it("property: the compiled function equals evaluate wherever evaluate is defined", () => {
    fc.assert(
      fc.property(exprArb(), envArb(), (e, env) => {
        let want: number;
        try {
          want = evaluate(e, env);
        } catch {
          return;
        }
        const f = toFunction(e, names);
        expect(f(...names.map((n) => env[n] as number)) + 0).toBe(want);
      }),
    );
  });

  it("refuses an expression over a variable it is not given", () => {
    expect(() => toFunction(add(variable("q", { min: 0, max: 1 }), 1), ["x"])).toThrow(/variable q/);
  });
});
