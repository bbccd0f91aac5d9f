// Type tests of @ovl/frontends' public surface, as published: the package imports itself, so
// these check dist/index.d.ts (the declarations a user gets), not the sources. Run by `vitest`
// (typecheck mode, tsconfig.test-d.json) after the build.
import type { ChunkPlan, CodedError, TensorDecl } from "@ovl/chunk-plan";
import {
  type CommProgram,
  type FrontendError,
  type FrontendErrorCode,
  type ImpliedCollective,
  type LoweredReshard,
  type LoweringPath,
  type Placement,
  type ReshardOptions,
  type ShardingSpec,
  asyncTpGemm,
  gemmProgram,
  inferCollective,
  lowerProgram,
  lowerReshard,
  partialSum,
  replicate,
  shard,
} from "@ovl/frontends";
import { describe, expectTypeOf, it } from "vitest";

describe("@ovl/frontends public types", () => {
  it("sharding specs are placements per mesh axis", () => {
    expectTypeOf(shard).returns.toEqualTypeOf<Placement>();
    expectTypeOf(replicate).returns.toEqualTypeOf<Placement>();
    expectTypeOf(partialSum).returns.toEqualTypeOf<Placement>();
    expectTypeOf<ShardingSpec>().toEqualTypeOf<readonly Placement[]>();
    expectTypeOf<Placement["kind"]>().toEqualTypeOf<"shard" | "replicate" | "partial">();
  });

  it("lowerReshard takes a tensor, a mesh and two specs and returns the implied collective and a chunk plan", () => {
    expectTypeOf(lowerReshard).parameters.toEqualTypeOf<[o: ReshardOptions]>();
    expectTypeOf<ReshardOptions["tensor"]>().toEqualTypeOf<TensorDecl>();
    expectTypeOf<ReshardOptions["path"]>().toEqualTypeOf<LoweringPath | undefined>();
    expectTypeOf<LoweringPath>().toEqualTypeOf<"direct" | "template" | "synth">();
    expectTypeOf(lowerReshard).returns.toEqualTypeOf<LoweredReshard>();
    expectTypeOf<LoweredReshard["plan"]>().toEqualTypeOf<ChunkPlan>();
    expectTypeOf<LoweredReshard["implied"]>().toEqualTypeOf<ImpliedCollective>();
    expectTypeOf<ImpliedCollective["kind"]>().toEqualTypeOf<
      "none" | "all-gather" | "reduce-scatter" | "all-reduce" | "all-to-all" | "slice" | "mixed"
    >();
    expectTypeOf(inferCollective).returns.toEqualTypeOf<ImpliedCollective>();
  });

  it("CommIR programs lower to chunk plans", () => {
    expectTypeOf(gemmProgram).returns.toEqualTypeOf<CommProgram>();
    expectTypeOf(asyncTpGemm).parameters.toEqualTypeOf<[p: CommProgram, ranks: number]>();
    expectTypeOf(lowerProgram).parameter(0).toEqualTypeOf<CommProgram>();
    expectTypeOf(lowerProgram).returns.toHaveProperty("plan").toEqualTypeOf<ChunkPlan>();
  });

  it("FrontendError is a CodedError with the closed code union", () => {
    expectTypeOf<FrontendError["code"]>().toEqualTypeOf<FrontendErrorCode>();
    expectTypeOf<FrontendErrorCode>().toEqualTypeOf<
      | "invalid-spec"
      | "unsupported-reshard"
      | "unsupported-path"
      | "unknown-axis"
      | "unknown-buffer"
      | "invalid-program"
      | "invalid-transform"
      | "mesh-mismatch"
      | "unsupported-schedule"
      | "unknown-kernel"
      | "execution"
      | "search-too-large"
    >();
    expectTypeOf<FrontendError>().toMatchTypeOf<CodedError<FrontendErrorCode>>();
  });
});
