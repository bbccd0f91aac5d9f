// Typed errors of signal-slot allocation: each carries a `code` a caller can switch on
// and a message that says which rank, op or region to fix.

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
export class SignalError extends Error {
  override readonly name = "SignalError";
  readonly code: SignalErrorCode;

  constructor(code: SignalErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}
