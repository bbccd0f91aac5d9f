// The CLI's typed errors. A `UsageError` (exit 2) is bad input and says what to type
// instead; a `CliError` (exit 1) is a well-formed request that failed (an invalid plan,
// a failed run). Errors of the libraries keep their own class and `code`.

/** What went wrong, for callers that switch on it. */
export type CliErrorCode =
  | "usage"
  | "unknown-operator"
  | "unknown-template"
  | "unknown-shape"
  | "bad-shape"
  | "bad-mesh"
  | "bad-file"
  | "invalid-plan"
  | "run-failed"
  | "unsupported";

/** A request that was understood but failed; the process exits with `exitCode` (1). */
export class CliError extends Error {
  override readonly name: string = "CliError";
  readonly code: CliErrorCode;
  readonly exitCode: number;

  constructor(code: CliErrorCode, message: string, exitCode = 1) {
    super(message);
    this.code = code;
    this.exitCode = exitCode;
  }
}

/** Input the CLI cannot act on; exits with 2 and a message that names what to type instead. */
export class UsageError extends CliError {
  override readonly name = "UsageError";

  constructor(code: CliErrorCode, message: string) {
    super(code, message, 2);
  }
}
