// An operator's plan lowered to the tile program its body runs: the tile order over the
// body's tiling (persistent over the default target's SMs, or one program per tile).
import { lowerToTileSchedule, type TileRole, type TileSchedule } from "@ovl/chunk-plan";
import { DEFAULT_TARGET } from "@ovl/primitives";
import { DEFAULT_GROUP_M, type Operator } from "../core/operator.js";

/**
 * `op`'s plan lowered against its body's tiling of `tensor` in `role`: persistent bodies over
 * the default target's SMs, others one program per tile.
 */
export function operatorSchedule(op: Operator, tensor: string, role: TileRole, persistent: boolean): TileSchedule {
  return lowerToTileSchedule(
    op.plan,
    {
      tensor,
      problem: { M: op.problem.M, N: op.problem.N, K: op.problem.K },
      tile: op.tile,
      persistent: persistent ? { numSms: DEFAULT_TARGET.smCount } : null,
      groupSizeM: op.groupM ?? DEFAULT_GROUP_M,
    },
    { role },
  );
}
