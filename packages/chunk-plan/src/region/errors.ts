// Typed errors of the region algebra: every failure carries a string `code` the caller can
// switch on, and a message that says which region and what to change.
import { CodedError } from "../errors.js";

/** Why a region operation was refused. */
export type RegionErrorCode = "rank-mismatch" | "tensor-mismatch" | "out-of-bounds" | "bad-split" | "bad-axis" | "bad-strides";

/** Thrown by region functions when their input cannot describe a valid box. */
export class RegionError extends CodedError<RegionErrorCode> {
  override readonly name = "RegionError";
}
