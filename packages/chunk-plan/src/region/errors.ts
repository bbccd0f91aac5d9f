// Typed errors of the region algebra: every failure carries a string `code` the caller can
// switch on, and a message that says which region and what to change.

/** Why a region operation was refused. */
export type RegionErrorCode =
  | "rank-mismatch"
  | "tensor-mismatch"
  | "out-of-bounds"
  | "bad-split"
  | "bad-axis"
  | "bad-strides";

/** Thrown by region functions when their input cannot describe a valid box. */
export class RegionError extends Error {
  /** Machine-readable reason, stable across versions. */
  readonly code: RegionErrorCode;

  constructor(code: RegionErrorCode, message: string) {
    super(message);
    this.name = "RegionError";
    this.code = code;
  }
}
