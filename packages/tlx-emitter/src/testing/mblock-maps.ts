// A per-m-block map for tests of TLX parts that stays a table (no expression fits it).
import type { IndexMap } from "@ovl/mapping";
import { mblockMap } from "../backends/tlx/mblock-map.js";

/** A map over 4 m-blocks that stays the table `name` (0, 2, 1, 3 on rank 0; 3, 1, 2, 0 on rank 1: no expression fits). */
export function tableMap(name: string): IndexMap {
  return mblockMap(name, [
    [0, 2, 1, 3],
    [3, 1, 2, 0],
  ]).map;
}
