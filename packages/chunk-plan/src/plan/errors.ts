// Typed errors of plan construction and rewriting (builders, shards, split, stream
// assignment, templates). A bad mesh, an out-of-range rank or a region too small to split
// becomes a PlanError with a `code` the caller can switch on, never a wrong plan.
import { CodedError } from "../errors.js";

/** Machine-readable reason of a {@link PlanError}. */
export type PlanErrorCode =
  | "invalid-mesh"
  | "invalid-rank"
  | "invalid-coords"
  | "invalid-axis"
  | "invalid-split"
  | "region-too-small"
  | "extent-too-small"
  | "indivisible"
  | "shape-mismatch"
  | "unknown-tensor"
  | "duplicate-tensor"
  | "out-of-bounds"
  | "invalid-dependency"
  | "invalid-policy"
  | "invalid-option"
  | "cycle";

/** The one error class of plan construction; `code` says what was wrong, `message` how to fix it. */
export class PlanError extends CodedError<PlanErrorCode> {
  override readonly name = "PlanError";
}

/** Throws `invalid-option` unless `n` is a safe integer >= `min`; returns it otherwise. */
export function checkInteger(n: number, what: string, min: number): number {
  if (!Number.isSafeInteger(n) || n < min) {
    throw new PlanError("invalid-option", `${what} must be an integer >= ${min}, got ${n}`);
  }
  return n;
}
