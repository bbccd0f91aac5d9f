// Typed errors of the autotuner: each has a `code` a caller can switch on and a message
// that says which input to change.
import { CodedError } from "@ovl/chunk-plan";

/** What stopped a search. */
export type TuneErrorCode = "bad-problem" | "bad-space" | "nothing-fits" | "bad-cache";

/** A search that cannot give a trustworthy answer (it never returns a guess instead). */
export class TuneError extends CodedError<TuneErrorCode> {
  override readonly name = "TuneError";
}
