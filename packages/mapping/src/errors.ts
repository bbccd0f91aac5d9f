// Typed errors of @ovl/mapping. Every bad input (a zero tile size, an unknown variable, a
// division by zero, a table of the wrong length) becomes a MappingError with a `code` the
// caller can switch on, never a wrong number.

/** Machine-readable reason of a {@link MappingError}. */
export type MappingErrorCode =
  | "overflow"
  | "division-by-zero"
  | "unknown-variable"
  | "out-of-range"
  | "non-integer"
  | "invalid-identifier"
  | "invalid-range"
  | "inconsistent-variable"
  | "invalid-expression"
  | "invalid-size"
  | "table-length"
  | "table-dtype"
  | "table-not-filled"
  | "index-out-of-bounds"
  | "invalid-routing"
  | "unsupported-dialect";

/** The one error class of the package; `code` says what was wrong, `message` how to fix it. */
export class MappingError extends Error {
  override readonly name = "MappingError";
  readonly code: MappingErrorCode;

  constructor(code: MappingErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** Throws `overflow` unless `n` is a safe integer; returns it otherwise. */
export function checkedInteger(n: number, what: string): number {
  if (!Number.isSafeInteger(n)) {
    throw new MappingError("overflow", `${what} = ${n} is not a safe integer (|n| <= 2^53 - 1); reduce the sizes or ranges involved`);
  }
  return n;
}

/** Throws `invalid-size` unless `n` is a safe integer >= `min` (1 by default). */
export function checkSize(n: number, what: string, min = 1): number {
  if (!Number.isSafeInteger(n) || n < min) {
    throw new MappingError("invalid-size", `${what} must be an integer >= ${min}, got ${n}`);
  }
  return n;
}
