import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { UsageError } from "./errors.js";
import { OPERATORS, parseMesh, parseOperator, resolveProblem } from "./problem.js";
import { closest, editDistance } from "./suggest.js";

describe("names typed on the command line", () => {
  it("suggests the operator a user meant, whatever case and separator they typed", () => {
    fc.assert(
      fc.property(fc.constantFrom(...OPERATORS), fc.constantFrom("-", "_", " "), fc.boolean(), (op, sep, upper) => {
        const typed = op.replaceAll("-", sep);
        expect(closest(upper ? typed.toUpperCase() : typed, OPERATORS)).toBe(op);
      }),
      { numRuns: 60 },
    );
    expect(closest("deploy", OPERATORS)).toBeUndefined();
    expect(editDistance("kitten", "sitting")).toBe(3);
  });

  it("rejects an unknown operator with a hint and exit code 2", () => {
    const err = (() => {
      try {
        parseOperator("ag_gemm");
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).exitCode).toBe(2);
    expect((err as UsageError).message).toBe("unknown operator 'ag_gemm'; did you mean 'ag-gemm'?");
    expect(() => parseOperator("all-gather", ["ag-gemm", "gemm-rs"])).toThrow(/takes ag-gemm or gemm-rs/);
  });
});

describe("resolveProblem", () => {
  it("maps the MLP shapes to each operator's GEMM (TileLink Table 4)", () => {
    const ag = resolveProblem("ag-gemm", { shape: "MLP-2", world: 4 });
    expect([ag.M, ag.N, ag.K]).toEqual([8192, 14336 / 4, 4096]);
    const rs = resolveProblem("gemm-rs", { shape: "MLP-2", world: 4 });
    expect([rs.M, rs.N, rs.K]).toEqual([8192, 4096, 14336 / 4]);
    expect(resolveProblem("all-gather", { m: 64, n: 8, k: 16, world: 2 }).template).toBe("swizzle");
  });

  it("takes an M that the world does not divide for AG+GEMM and the collectives (uneven shards)", () => {
    const p = resolveProblem("ag-gemm", { m: 100, n: 32, k: 32, world: 3 });
    expect([p.M, p.world]).toEqual([100, 3]);
    expect(resolveProblem("all-gather", { m: 10, n: 8, k: 8, world: 4 }).M).toBe(10);
  });

  it("reads meshes and refuses impossible ones with what to type", () => {
    expect(parseMesh({ mesh: "2x4" })).toEqual([2, 4]);
    expect(parseMesh({ world: 4 })).toEqual([4]);
    expect(() => parseMesh({ mesh: "2x" })).toThrow(/--mesh 2x4/);
    expect(() => parseMesh({ mesh: "2x4", world: 4 })).toThrow(/disagrees/);
    expect(() => resolveProblem("ag-gemm", { world: 1 })).toThrow(/--world 2 or more/);
    expect(() => resolveProblem("ag-gemm", { world: 3 })).toThrow(/use --world 2, 4, 8/);
    expect(() => resolveProblem("all-gather", { template: "hierarchical", world: 8 })).toThrow(/--mesh 2x4/);
    expect(() => resolveProblem("gemm-rs", { template: "swizzle" })).toThrow(/unknown template 'swizzle'; use one of: direct, ring/);
    expect(() => resolveProblem("ag-gemm", { m: 8, n: 8 })).toThrow(/all of --m, --n and --k/);
    expect(() => resolveProblem("gemm-rs", { m: 6, n: 8, k: 8, world: 4 })).toThrow(/multiple of 4/);
    expect(() => resolveProblem("gemm-ar", { m: 6, n: 8, k: 8, world: 4 })).toThrow(/multiple of 4/);
    expect(() => resolveProblem("ag-gemm", { tile: "100x256x64" })).toThrow(/--tile 128x256x64/);
  });
});
