// Type tests of @ovl/mapping's public surface, as published: the package imports itself, so
// these check dist/index.d.ts (the declarations a user gets), not the sources. Run by `vitest`
// (typecheck mode, tsconfig.test-d.json) after the build.
import {
  type CoverageReport,
  type DivExpr,
  type Expr,
  type ExprLike,
  type IndexMap,
  type LookupTable,
  type MappingError,
  type MappingErrorCode,
  type NaryExpr,
  type Range,
  type RankReport,
  type TileMapping,
  type VarExpr,
  add,
  allGatherPull,
  bounds,
  coversExactlyOnce,
  dynamicMap,
  evaluate,
  evaluateMap,
  fillTable,
  floorDiv,
  mapToPython,
  rankMapConsistent,
  simplify,
  toPython,
  variable,
} from "@ovl/mapping";
import { describe, expectTypeOf, it } from "vitest";

describe("@ovl/mapping public types", () => {
  it("expressions are plain data discriminated by op; builders accept numbers", () => {
    expectTypeOf<Expr["op"]>().toEqualTypeOf<"const" | "var" | "add" | "mul" | "min" | "max" | "floorDiv" | "ceilDiv" | "mod">();
    expectTypeOf<ExprLike>().toEqualTypeOf<Expr | number>();
    expectTypeOf(variable).parameters.toEqualTypeOf<[name: string, range: Range]>();
    expectTypeOf(variable).returns.toEqualTypeOf<VarExpr>();
    expectTypeOf(add).parameters.toEqualTypeOf<ExprLike[]>();
    expectTypeOf(add).returns.toEqualTypeOf<NaryExpr>();
    expectTypeOf(floorDiv).returns.toEqualTypeOf<DivExpr>();
    expectTypeOf(simplify).returns.toEqualTypeOf<Expr>();
  });

  it("evaluation, bounds and printers", () => {
    expectTypeOf(evaluate).returns.toEqualTypeOf<number>();
    expectTypeOf(bounds).returns.toEqualTypeOf<Range>();
    expectTypeOf(toPython).returns.toEqualTypeOf<string>();
    expectTypeOf(toPython).toBeCallableWith(floorDiv(1, 2), { dialect: "triton" });
    // @ts-expect-error only Python and Triton dialects exist
    toPython(floorDiv(1, 2), { dialect: "cuda" });
  });

  it("collective maps, tables and analyses", () => {
    expectTypeOf(allGatherPull).returns.toEqualTypeOf<TileMapping>();
    expectTypeOf<keyof TileMapping>().toEqualTypeOf<"worldSize" | "shape" | "rank" | "channel">();
    expectTypeOf(fillTable).returns.toEqualTypeOf<LookupTable>();
    expectTypeOf(dynamicMap).returns.toEqualTypeOf<IndexMap>();
    expectTypeOf(evaluateMap).returns.toEqualTypeOf<number>();
    expectTypeOf(mapToPython).returns.toEqualTypeOf<string>();
    expectTypeOf(coversExactlyOnce).returns.toEqualTypeOf<CoverageReport>();
    expectTypeOf<Extract<CoverageReport, { ok: true }>>().toEqualTypeOf<{ ok: true; tileCount: number; emptyTiles: number[] }>();
    expectTypeOf(rankMapConsistent).returns.toEqualTypeOf<RankReport>();
  });

  it("MappingError carries the closed code union", () => {
    expectTypeOf<MappingError["code"]>().toEqualTypeOf<MappingErrorCode>();
    expectTypeOf<MappingErrorCode>().toEqualTypeOf<
      | "overflow"
      | "division-by-zero"
      | "unknown-variable"
      | "out-of-range"
      | "non-integer"
      | "invalid-identifier"
      | "invalid-range"
      | "inconsistent-variable"
      | "invalid-expression"
      | "invalid-size"
      | "table-length"
      | "table-dtype"
      | "table-not-filled"
      | "index-out-of-bounds"
      | "invalid-routing"
      | "unsupported-dialect"
    >();
    expectTypeOf<MappingError>().toMatchTypeOf<Error>();
  });
});
