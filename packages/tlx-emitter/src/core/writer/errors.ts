// Typed errors of code emission: every refusal to emit (an unsafe name, a non-finite
// literal, a plan or schedule a kernel cannot consume) carries a `code` a caller can
// branch on and a message that says what to change.

/** What went wrong while emitting. */
export type EmitErrorCode =
  | "bad-identifier"
  | "reserved-identifier"
  | "bad-literal"
  | "bad-text"
  | "unbalanced-indent"
  | "bad-param"
  | "bad-plan"
  | "bad-schedule"
  | "unsupported-op"
  | "unsupported-dependency"
  | "bad-manifest"
  // Refusals of a user's local kernel (src/local): each names the file and line.
  | "syntax-error"
  | "no-annotation"
  | "bad-annotation"
  | "unknown-parameter"
  | "unsafe-tile-loop"
  | "unsafe-load"
  | "unsafe-store"
  | "name-collision"
  | "bad-import"
  | "bad-signature"
  | "bad-program";

/** An emission error; `code` says which rule was broken. */
export class EmitError extends Error {
  /** Machine-readable reason. */
  readonly code: EmitErrorCode;

  constructor(code: EmitErrorCode, message: string) {
    super(message);
    this.name = "EmitError";
    this.code = code;
  }
}
