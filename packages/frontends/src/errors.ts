// Errors of the frontends: a partition IR reshard, a CommIR program or a schedule search
// that cannot become a chunk plan. Each carries a `code` a caller can branch on.
import { CodedError } from "@ovl/chunk-plan";

/** What went wrong in a frontend. */
export type FrontendErrorCode =
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
  | "search-too-large";

/** A frontend fault: `code` says what, the message says what to change. */
export class FrontendError extends CodedError<FrontendErrorCode> {
  override readonly name = "FrontendError";
}
