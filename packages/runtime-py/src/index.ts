// Public surface of @ovl/runtime-py: the TypeScript driver of the `ovl_runtime` Python
// runner, which runs ovl manifests on GPUs under torchrun or emulated on the CPU.
export { RunnerError, codeOfExit } from "./errors.js";
export type { RunnerErrorCode } from "./errors.js";
export { REPORT_SCHEMA, RankTimes, Report, ReportCheck, ReportFailure } from "./report.js";
export { defaultPython, runManifest, runnerArgs } from "./run.js";
export type { RunManifestOptions, RunnerProgress } from "./run.js";
export { ensurePythonEnv, type PythonEnvOptions } from "./python-env.js";
