// Schedule parts of TLX kernels: the persistent, L2-grouped tile loop of the plain path
// (AutoOverlap §5.2), optionally visiting m-blocks in a per-rank order table so that
// tiles follow chunk arrival (local chunk first).
import { checkPositive } from "../kernels/common.js";
import type { TlxSchedulePart } from "./parts.js";

/** Options of `groupedTiles`. */
export interface GroupedTilesOptions {
  /** Row blocks per L2 group (`GROUP_M`). */
  readonly groupM: number;
  /** Read `pid_m = order_ptr[visit_m]` (the schedule's m-block order); else `pid_m = visit_m`. */
  readonly ordered: boolean;
}

/**
 * The persistent grouped traversal: program `pid` strides over tile ids by the number of
 * programs; within a group of `GROUP_M` visit rows tiles go down the rows first (B stays
 * in L2); with `ordered`, the m-block of visit row `v` is `order_ptr[v]`.
 */
export function groupedTiles(o: GroupedTilesOptions): TlxSchedulePart {
  const GROUP_M = checkPositive(o.groupM, "groupM");
  return {
    name: o.ordered ? "ordered-grouped-tiles" : "grouped-tiles",
    args: o.ordered ? ["order_ptr"] : [],
    constexprs: { GROUP_M },
    expect: [],
    writeTileLoop(w, body) {
      w.line("num_pid_in_group = GROUP_M * num_pid_n");
      w.block("for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0))", (l) => {
        l.line("first_m = (tile_id // num_pid_in_group) * GROUP_M");
        l.line("group_size_m = min(num_pid_m - first_m, GROUP_M)");
        l.line("visit_m = first_m + (tile_id % group_size_m)");
        l.line("pid_n = (tile_id % num_pid_in_group) // group_size_m");
        l.line(o.ordered ? "pid_m = tl.load(order_ptr + visit_m)" : "pid_m = visit_m");
        body(l);
      });
    },
  };
}
