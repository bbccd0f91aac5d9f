// Type tests of @ovl/cli's public surface, as published: the package imports itself, so these
// check dist/index.d.ts (the declarations a user gets), not the sources. Run by `vitest`
// (typecheck mode, tsconfig.test-d.json) after the build.
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import {
  type CliError,
  type CliErrorCode,
  type DemoOptions,
  type DemoResult,
  type Io,
  type OPERATORS,
  type Operator,
  UsageError,
  processIo,
  runCli,
  runDemo,
} from "@ovl/cli";
import { describe, expectTypeOf, it } from "vitest";

describe("@ovl/cli public types", () => {
  it("runCli is the command line as a function: argv and streams in, exit status out", () => {
    expectTypeOf(runCli).parameters.toEqualTypeOf<[argv: readonly string[], io?: Io]>();
    expectTypeOf(runCli).returns.toEqualTypeOf<Promise<number>>();
    expectTypeOf<Io>().toEqualTypeOf<{
      readonly out: (text: string) => void;
      readonly err: (text: string) => void;
      readonly interactive: boolean;
    }>();
    expectTypeOf(processIo).toEqualTypeOf<Io>();
  });

  it("runDemo takes any subset of its options and returns plan, schedule, files and summary", () => {
    expectTypeOf(runDemo).parameters.toEqualTypeOf<[options?: Partial<DemoOptions>]>();
    expectTypeOf(runDemo).toBeCallableWith({ world: 4, outDir: "demo", emulate: false });
    expectTypeOf(runDemo).returns.toEqualTypeOf<Promise<DemoResult>>();
    expectTypeOf<DemoResult["plan"]>().toEqualTypeOf<ChunkPlan>();
    expectTypeOf<DemoResult["schedule"]>().toEqualTypeOf<TileSchedule>();
    expectTypeOf<DemoResult["summary"]["predictedMs"]>().toEqualTypeOf<number>();
  });

  it("operators", () => {
    expectTypeOf<Operator>().toEqualTypeOf<(typeof OPERATORS)[number]>();
    expectTypeOf<Operator>().toEqualTypeOf<
      "ag-gemm" | "gemm-rs" | "gemm-ar" | "a2a-gemm" | "all-gather" | "reduce-scatter" | "all-reduce" | "all-to-all"
    >();
  });

  it("errors carry the closed code union and an exit code", () => {
    expectTypeOf<CliError["code"]>().toEqualTypeOf<CliErrorCode>();
    expectTypeOf<CliErrorCode>().toEqualTypeOf<
      | "usage"
      | "unknown-operator"
      | "unknown-template"
      | "unknown-shape"
      | "bad-shape"
      | "bad-mesh"
      | "bad-file"
      | "invalid-plan"
      | "run-failed"
      | "unsupported"
    >();
    expectTypeOf<CliError["exitCode"]>().toEqualTypeOf<number>();
    expectTypeOf<UsageError>().toMatchTypeOf<CliError>();
    expectTypeOf(UsageError).constructorParameters.toEqualTypeOf<[code: CliErrorCode, message: string]>();
  });
});
