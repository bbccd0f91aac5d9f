// Typed errors of the simulator and cost model: each has a `code` a caller can switch on
// and a message that says which input to change.
import { CodedError } from "@ovl/chunk-plan";

/** What prevented a prediction. */
export type SimulateErrorCode =
  | "bad-hardware"
  | "bad-option"
  | "schedule-mismatch"
  | "unknown-slot"
  | "unresolved-dependency"
  | "bad-problem";

/** Inputs the simulator cannot turn into a trustworthy number (it never guesses one). */
export class SimulateError extends CodedError<SimulateErrorCode> {
  override readonly name = "SimulateError";
}
