// @ovl/runtime-py README: the driver's exports load (execa resolves in a plain npm project) and
// build the runner's command line; runManifest's README call type-checks.
import { codeOfExit, REPORT_SCHEMA, type Report, RunnerError, type RunManifestOptions, runManifest, runnerArgs } from "@ovl/runtime-py";
import { holds, same } from "./check.js";

const options: RunManifestOptions = { emulate: true, epochs: 2 };
same(
  runnerArgs("m.json", "r.json", options),
  ["-m", "ovl_runtime", "run", "m.json", "--out", "r.json", "--emulate", "--epochs", "2"],
  "the runner's command line",
);
same(REPORT_SCHEMA, "ovl.report/v1", "the report schema tag");
same(codeOfExit(3, undefined), "wait-timeout", "exit code 3 is a wait timeout");
holds(new RunnerError("bad-manifest", "x") instanceof Error, "RunnerError is an Error");

// The README's call, type-checked: running it needs a Python with ovl-runtime (the runner's own
// tests cover that), which a plain npm project does not have.
export function emulate(manifestPath: string, python: string): Promise<Report> {
  return runManifest(manifestPath, { ...options, python });
}
console.log("@ovl/runtime-py: README example ok");
