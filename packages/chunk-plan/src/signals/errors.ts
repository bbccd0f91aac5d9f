// Typed errors of signal-slot allocation: each carries a `code` a caller can switch on
// and a message that says which rank, op or region to fix.
import { CodedError } from "../errors.js";

/** What went wrong while allocating or reading signal slots. */
export type SignalErrorCode =
  | "bad-rank"
  | "bad-peer"
  | "unknown-tensor"
  | "bad-region"
  | "conflicting-writes"
  | "bad-epoch"
  | "counter-overflow";

/** A plan (or a query on its signals) that cannot be given a correct slot layout. */
export class SignalError extends CodedError<SignalErrorCode> {
  override readonly name = "SignalError";
}
