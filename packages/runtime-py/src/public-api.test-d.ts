// Type tests of @ovl/runtime-py's public surface, as published: the package imports itself, so
// these check dist/index.d.ts (the declarations a user gets), not the sources. Run by `vitest`
// (typecheck mode, tsconfig.test-d.json) after the build.
import {
  type PythonEnvOptions,
  type REPORT_SCHEMA,
  type Report,
  type RunnerError,
  type RunnerErrorCode,
  type RunnerProgress,
  type RunManifestOptions,
  codeOfExit,
  defaultPython,
  ensurePythonEnv,
  runManifest,
  runnerArgs,
} from "@ovl/runtime-py";
import { describe, expectTypeOf, it } from "vitest";

describe("@ovl/runtime-py public types", () => {
  it("runManifest takes a manifest path and options and resolves to a parsed report", () => {
    expectTypeOf(runManifest).parameters.toEqualTypeOf<[manifestPath: string, options?: RunManifestOptions]>();
    expectTypeOf(runManifest).returns.toEqualTypeOf<Promise<Report>>();
    expectTypeOf(runManifest).toBeCallableWith("m.json", { emulate: true, epochs: 2 });
    expectTypeOf<RunManifestOptions["engine"]>().toEqualTypeOf<"auto" | "numpy" | "interpret" | undefined>();
    expectTypeOf<RunManifestOptions["onProgress"]>().toEqualTypeOf<((event: RunnerProgress) => void) | undefined>();
    expectTypeOf<Report["$schema"]>().toEqualTypeOf<typeof REPORT_SCHEMA>();
    expectTypeOf<Report["ok"]>().toEqualTypeOf<boolean>();
  });

  it("the command line and the interpreter", () => {
    expectTypeOf(runnerArgs).parameters.toEqualTypeOf<[manifestPath: string, out: string, o: RunManifestOptions]>();
    expectTypeOf(runnerArgs).returns.toEqualTypeOf<string[]>();
    expectTypeOf(defaultPython).returns.toEqualTypeOf<string>();
    expectTypeOf(ensurePythonEnv).parameters.toEqualTypeOf<[options?: PythonEnvOptions]>();
    expectTypeOf(ensurePythonEnv).returns.toEqualTypeOf<Promise<string>>();
  });

  it("RunnerError carries the closed code union and the runner's report", () => {
    expectTypeOf<RunnerError["code"]>().toEqualTypeOf<RunnerErrorCode>();
    expectTypeOf<RunnerErrorCode>().toEqualTypeOf<
      | "bad-manifest"
      | "check-failed"
      | "wait-timeout"
      | "runner-failed"
      | "spawn-failed"
      | "bad-report"
      | "python-missing"
      | "install-failed"
    >();
    expectTypeOf<RunnerError["report"]>().toEqualTypeOf<Report | undefined>();
    expectTypeOf(codeOfExit).returns.toEqualTypeOf<RunnerErrorCode>();
    expectTypeOf<RunnerError>().toMatchTypeOf<Error>();
  });
});
