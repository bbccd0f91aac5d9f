// Type tests of @ovl/sim's public surface, as published: the package imports itself, so these
// check dist/index.d.ts (the declarations a user gets), not the sources. Run by `vitest`
// (typecheck mode, tsconfig.test-d.json) after the build.
import type { ChunkPlan, CodedError, TileSchedule } from "@ovl/chunk-plan";
import {
  type CostFunction,
  type HardwareModel,
  type SimulateError,
  type SimulateOptions,
  type SimulationResult,
  type TimelineChartInput,
  type TuneError,
  type TuneOptions,
  type TuneResult,
  type VegaLiteSpec,
  renderSvg,
  simulate,
  simulatorCost,
  timelineChart,
  timelineSpec,
  tune,
} from "@ovl/sim";
import { describe, expectTypeOf, it } from "vitest";

describe("@ovl/sim public types", () => {
  it("simulate takes a plan, its tile schedule and a hardware model", () => {
    expectTypeOf(simulate).parameters.toEqualTypeOf<[plan: ChunkPlan, schedule: TileSchedule, options: SimulateOptions]>();
    expectTypeOf<SimulateOptions["hardware"]>().toEqualTypeOf<HardwareModel | string>();
    expectTypeOf(simulate).returns.toEqualTypeOf<SimulationResult>();
    expectTypeOf<SimulationResult["latencyMs"]>().toEqualTypeOf<number>();
    expectTypeOf<SimulationResult["nonOverlappedMs"]>().toEqualTypeOf<number>();
    expectTypeOf<SimulationResult["boundMs"]>().toEqualTypeOf<number>();
    expectTypeOf<SimulationResult["$schema"]>().toEqualTypeOf<"ovl.sim-result/v1">();
  });

  it("charts: a simulation result draws as is; specs are JSON, free of DOM types", () => {
    expectTypeOf<SimulationResult>().toMatchTypeOf<TimelineChartInput>();
    expectTypeOf(timelineChart).returns.toEqualTypeOf<Promise<string>>();
    expectTypeOf(timelineSpec).returns.toEqualTypeOf<VegaLiteSpec>();
    expectTypeOf(renderSvg).parameters.toEqualTypeOf<[spec: VegaLiteSpec]>();
  });

  it("tune ranks candidates by a cost function", () => {
    expectTypeOf(simulatorCost).returns.toEqualTypeOf<CostFunction>();
    expectTypeOf<TuneOptions["cost"]>().toEqualTypeOf<CostFunction>();
    expectTypeOf(tune).returns.toEqualTypeOf<Promise<TuneResult>>();
    expectTypeOf<TuneResult["winnerKey"]>().toEqualTypeOf<string>();
    expectTypeOf<TuneResult["decision"]>().toEqualTypeOf<"overlapped" | "sequential">();
  });

  it("errors carry closed code unions and extend chunk-plan's CodedError", () => {
    expectTypeOf<SimulateError["code"]>().toEqualTypeOf<
      "bad-hardware" | "bad-option" | "schedule-mismatch" | "unknown-slot" | "unresolved-dependency" | "bad-problem"
    >();
    expectTypeOf<TuneError["code"]>().toEqualTypeOf<"bad-problem" | "bad-space" | "nothing-fits" | "bad-cache">();
    expectTypeOf<SimulateError>().toMatchTypeOf<CodedError<string>>();
    expectTypeOf<TuneError>().toMatchTypeOf<CodedError<string>>();
  });
});
