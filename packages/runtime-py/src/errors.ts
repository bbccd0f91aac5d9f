// Typed errors of the driver: every failure of a run is a RunnerError whose `code` says what
// went wrong (the runner's exit code, a spawn failure, an unreadable report) and whose
// message is the runner's own, naming the field, rank or slot to fix.
import type { Report } from "./report.js";

/**
 * What went wrong:
 * - `bad-manifest`: the manifest (or the command line) was rejected (exit code 2);
 * - `check-failed`: an output differed from the torch/numpy reference (exit code 1);
 * - `wait-timeout`: a bounded wait gave up — a copy or notify never came (exit code 3);
 * - `runner-failed`: the runner failed otherwise (GPU stack error, unexpected exit);
 * - `spawn-failed`: Python could not be started;
 * - `bad-report`: the runner exited but its report is missing or not `ovl.report/v1`.
 */
export type RunnerErrorCode =
  | "bad-manifest"
  | "check-failed"
  | "wait-timeout"
  | "runner-failed"
  | "spawn-failed"
  | "bad-report"
  | "python-missing"
  | "install-failed";

/** A failed run of the Python runner. `report` is set when the runner wrote one (failed checks, timeouts). */
export class RunnerError extends Error {
  override readonly name = "RunnerError";

  constructor(
    readonly code: RunnerErrorCode,
    message: string,
    readonly details: { exitCode?: number; report?: Report; stderr?: string } = {},
  ) {
    super(message);
  }

  /** The runner's report, when it wrote one before failing. */
  get report(): Report | undefined {
    return this.details.report;
  }
}

/** Maps the runner's exit code (0 ok, 1 check failed, 2 bad manifest/usage, 3 wait timeout) to an error code. */
export function codeOfExit(exitCode: number, lastErrorCode: string | undefined): RunnerErrorCode {
  if (exitCode === 2) return "bad-manifest";
  if (exitCode === 3) return "wait-timeout";
  if (exitCode === 1) return lastErrorCode === undefined || lastErrorCode === "check-failed" ? "check-failed" : "runner-failed";
  return "runner-failed";
}
