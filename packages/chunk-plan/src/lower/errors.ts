// Typed errors of lowering a chunk plan to a tile schedule: each has a `code` a caller
// can switch on and a message naming the rank, tile or op to fix.
import { CodedError } from "../errors.js";

/** What prevented a correct tile schedule. */
export type TileScheduleErrorCode =
  | "bad-tiling"
  | "unknown-tensor"
  | "shape-mismatch"
  | "bad-role"
  | "unknown-dependency"
  | "dependency-cycle"
  | "unfilled-slot"
  | "uncovered-tile"
  | "missing-signals";

/** A plan and tiling that cannot be lowered to a schedule that is correct by construction. */
export class TileScheduleError extends CodedError<TileScheduleErrorCode> {
  override readonly name = "TileScheduleError";
}
