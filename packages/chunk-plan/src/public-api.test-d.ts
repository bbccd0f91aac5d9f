// Type tests of @ovl/chunk-plan's public surface, as published: the package imports itself, so
// these check dist/index.d.ts (the declarations a user gets), not the sources. Run by `vitest`
// (typecheck mode, tsconfig.test-d.json) after the build.
import {
  type ChunkPlan,
  type CodedError,
  type FormatError,
  type InvalidPlanError,
  type LowerOptions,
  type PlanError,
  type PlanValidation,
  type PlanValidationError,
  type RegionError,
  type SignalError,
  type TileSchedule,
  type TileScheduleError,
  type TileScheduleIssue,
  allGatherSwizzle,
  assertValidPlan,
  checkTileSchedule,
  dumpPlan,
  lowerToTileSchedule,
  parsePlan,
  planSignals,
  serializePlan,
  validatePlan,
} from "@ovl/chunk-plan";
import { describe, expectTypeOf, it } from "vitest";

describe("@ovl/chunk-plan public types", () => {
  it("templates build plans; planSignals adds the slots", () => {
    expectTypeOf(allGatherSwizzle).returns.toEqualTypeOf<ChunkPlan>();
    expectTypeOf(allGatherSwizzle).toBeCallableWith({
      tensor: { name: "A", shape: [8192, 4096], dtype: "bf16" },
      axis: 0,
      mesh: [4],
      split: 2,
      side: "push",
    });
    expectTypeOf(planSignals).parameters.toEqualTypeOf<[plan: ChunkPlan]>();
    expectTypeOf(planSignals).returns.toEqualTypeOf<ChunkPlan>();
    expectTypeOf<ChunkPlan["$schema"]>().toEqualTypeOf<"ovl.chunk-plan/v1">();
  });

  it("validatePlan returns ok or findings; assertValidPlan throws", () => {
    expectTypeOf(validatePlan).returns.toEqualTypeOf<PlanValidation>();
    expectTypeOf<PlanValidation>().toEqualTypeOf<{ ok: true } | { ok: false; errors: PlanValidationError[] }>();
    expectTypeOf(assertValidPlan).returns.toEqualTypeOf<void>();
    expectTypeOf<PlanValidationError["rank"]>().toEqualTypeOf<number | undefined>();
  });

  it("lowering yields a tile schedule that checks against the plan", () => {
    expectTypeOf(lowerToTileSchedule).parameter(0).toEqualTypeOf<ChunkPlan>();
    expectTypeOf(lowerToTileSchedule).returns.toEqualTypeOf<TileSchedule>();
    expectTypeOf<NonNullable<LowerOptions["role"]>>().toEqualTypeOf<"consumer" | "producer">();
    expectTypeOf(checkTileSchedule).parameters.toEqualTypeOf<[schedule: TileSchedule, plan: ChunkPlan]>();
    expectTypeOf(checkTileSchedule).returns.toEqualTypeOf<TileScheduleIssue[]>();
  });

  it("formats", () => {
    expectTypeOf(parsePlan).parameters.toEqualTypeOf<[json: unknown]>();
    expectTypeOf(parsePlan).returns.toEqualTypeOf<ChunkPlan>();
    expectTypeOf(serializePlan).returns.toEqualTypeOf<string>();
    expectTypeOf(dumpPlan).returns.toEqualTypeOf<string>();
  });

  it("every error class carries its closed code union", () => {
    expectTypeOf<PlanError["code"]>().toEqualTypeOf<
      | "invalid-mesh"
      | "invalid-rank"
      | "invalid-coords"
      | "invalid-axis"
      | "invalid-split"
      | "region-too-small"
      | "extent-too-small"
      | "indivisible"
      | "shape-mismatch"
      | "unknown-tensor"
      | "duplicate-tensor"
      | "out-of-bounds"
      | "invalid-dependency"
      | "invalid-policy"
      | "invalid-option"
      | "cycle"
    >();
    expectTypeOf<RegionError["code"]>().toEqualTypeOf<
      "rank-mismatch" | "tensor-mismatch" | "out-of-bounds" | "bad-split" | "bad-axis" | "bad-strides"
    >();
    expectTypeOf<FormatError["code"]>().toEqualTypeOf<"invalid-json" | "invalid-plan">();
    expectTypeOf<InvalidPlanError["code"]>().toEqualTypeOf<"invalid-plan">();
    expectTypeOf<InvalidPlanError["errors"]>().toEqualTypeOf<PlanValidationError[]>();
    expectTypeOf<SignalError["code"]>().toEqualTypeOf<
      "bad-rank" | "bad-peer" | "unknown-tensor" | "bad-region" | "conflicting-writes" | "bad-epoch" | "counter-overflow"
    >();
    expectTypeOf<TileScheduleError["code"]>().toEqualTypeOf<
      | "bad-tiling"
      | "unknown-tensor"
      | "shape-mismatch"
      | "bad-role"
      | "unknown-dependency"
      | "dependency-cycle"
      | "unfilled-slot"
      | "uncovered-tile"
      | "missing-signals"
    >();
    expectTypeOf<PlanValidationError["code"]>().toEqualTypeOf<
      | "duplicate-tensor"
      | "unknown-tensor"
      | "rank-mismatch"
      | "out-of-bounds"
      | "shape-mismatch"
      | "dtype-mismatch"
      | "bad-axis"
      | "collective-shape"
      | "collective-mismatch"
      | "rank-out-of-mesh"
      | "p2p-self"
      | "rank-plan-order"
      | "bad-claim"
      | "missing-dep"
      | "duplicate-write"
      | "missing-write"
      | "deadlock"
      | "read-before-write"
      | "write-race"
      | "claim-mismatch"
    >();
    // The classes other packages extend: one catch (`instanceof CodedError`) sees every coded error.
    expectTypeOf<PlanError>().toMatchTypeOf<CodedError<string>>();
    expectTypeOf<TileScheduleError>().toMatchTypeOf<CodedError<string>>();
  });
});
