// Schedule parts of TLX kernels: the persistent, L2-grouped tile loop of the plain path
// (AutoOverlap §5.2), optionally visiting m-blocks in a per-rank order table so that
// tiles follow chunk arrival (local chunk first); and, for sm_100a, tiles handed out by
// cluster launch control.
import type { IndexMap } from "@ovl/mapping";
import { checkPositive } from "../triton/kernels/common.js";
import { EmitError, type PythonWriter } from "../../core/writer/index.js";
import { checkClusterM } from "./compute.js";
import { mblockArgs, writeMblockRead } from "./mblock-map.js";
import type { TlxSchedulePart } from "./parts.js";

/** Options of `groupedTiles`. */
export interface GroupedTilesOptions {
  /** Row blocks per L2 group (`GROUP_M`). */
  readonly groupM: number;
  /**
   * The m-block of each visit row (a map over `ovl_m` = the visit row and `ovl_rank`, `mblockMap`):
   * the schedule's m-block order. Without it `pid_m = visit_m`.
   */
  readonly order?: IndexMap;
  /**
   * CTAs per cluster along M (1 or 2; default 1). 2: the loop walks pairs of visit rows — the
   * two CTAs of a cluster take visit rows `2p` and `2p + 1` of one n-block together (`cta`, the
   * CTA's rank in its cluster, picks the row), clusters stride over pairs, and a group holds
   * `GROUP_M / 2` pairs of rows (`GROUP_M` even). The number of m-blocks must be even.
   */
  readonly clusterM?: number;
}

/**
 * The persistent grouped traversal: program `pid` strides over tile ids by the number of
 * programs; within a group of `GROUP_M` visit rows tiles go down the rows first (B stays
 * in L2); with `order`, the m-block of visit row `v` is `order(v)`: an inline expression, or
 * a table load issued one tile ahead (the load of the next tile's m-block is in flight while
 * this tile runs, so no task stalls on it at the top of a tile).
 */
export function groupedTiles(o: GroupedTilesOptions): TlxSchedulePart {
  const GROUP_M = checkPositive(o.groupM, "groupM");
  const order = o.order;
  if (checkClusterM(o.clusterM ?? 1) === 2) return pairedTiles(GROUP_M, order);
  return {
    name: order === undefined ? "grouped-tiles" : "ordered-grouped-tiles",
    args: order === undefined ? [] : mblockArgs(order),
    constexprs: { GROUP_M },
    expect: [],
    lastTiles: "tile_id + 2 * tl.num_programs(0) >= num_tiles",
    writeTileLoop(w, body) {
      w.line("num_pid_in_group = GROUP_M * num_pid_n");
      if (order?.kind === "dynamic") writeOrderAhead(w, order, "tl.program_id(0)");
      w.block("for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0))", (l) => {
        writeGroupedPids(l);
        if (order === undefined) l.line("pid_m = visit_m");
        else if (order.kind === "static") writeMblockRead(l, "pid_m", order, "visit_m");
        else {
          l.line("pid_m = next_pid_m");
          writeOrderAhead(l, order, "tile_id + tl.num_programs(0)");
        }
        body(l);
      });
    },
  };
}

/**
 * `groupedTiles` for 2×1 clusters: cluster `program_id // 2` strides over pairs of visit rows
 * by the number of clusters, grouped `GROUP_M / 2` pairs at a time; the CTA of rank `cta`
 * takes row `2p + cta`, so both CTAs of a cluster share the n-block (and its B blocks).
 */
function pairedTiles(GROUP_M: number, order: IndexMap | undefined): TlxSchedulePart {
  if (GROUP_M % 2 !== 0) throw new EmitError("bad-param", `clusterM 2 groups pairs of rows: groupM must be even, got ${GROUP_M}`);
  return {
    name: order === undefined ? "paired-grouped-tiles" : "ordered-paired-grouped-tiles",
    args: order === undefined ? [] : mblockArgs(order),
    constexprs: { GROUP_M },
    expect: [],
    clusterM: 2,
    // Clusters stride over pairs by num_programs / 2: two strides are num_programs.
    lastTiles: "pair_id + tl.num_programs(0) >= num_pid_p * num_pid_n",
    writeTileLoop(w, body) {
      w.line("num_pid_p = num_pid_m // 2");
      w.line("pairs_in_group = (GROUP_M // 2) * num_pid_n");
      w.block("for pair_id in range(tl.program_id(0) // 2, num_pid_p * num_pid_n, tl.num_programs(0) // 2)", (l) => {
        l.line("first_p = (pair_id // pairs_in_group) * (GROUP_M // 2)");
        l.line("group_size_p = min(num_pid_p - first_p, GROUP_M // 2)");
        l.line("visit_m = (first_p + (pair_id % group_size_p)) * 2 + cta");
        l.line("pid_n = (pair_id % pairs_in_group) // group_size_p");
        if (order === undefined) l.line("pid_m = visit_m");
        else writeMblockRead(l, "pid_m", order, "visit_m");
        body(l);
      });
    },
  };
}

/** `next_pid_m = order[visit row of tile `tile`]` (0 past the last tile), for the next iteration. */
function writeOrderAhead(w: PythonWriter, order: IndexMap & { kind: "dynamic" }, tile: string): void {
  w.line(`ahead = ${tile}`);
  w.line("ahead_first = (ahead // num_pid_in_group) * GROUP_M");
  w.line("ahead_size = tl.maximum(tl.minimum(num_pid_m - ahead_first, GROUP_M), 1)");
  w.line(`next_pid_m = tl.load(${order.table.name} + ahead_first + (ahead % ahead_size), mask=ahead < num_tiles, other=0)`);
}

/** `visit_m`, `pid_n` of `tile_id` in the grouped traversal (`num_pid_in_group` defined before). */
function writeGroupedPids(l: PythonWriter): void {
  l.line("first_m = (tile_id // num_pid_in_group) * GROUP_M");
  l.line("group_size_m = min(num_pid_m - first_m, GROUP_M)");
  l.line("visit_m = first_m + (tile_id % group_size_m)");
  l.line("pid_n = (tile_id % num_pid_in_group) // group_size_m");
}

/** Options of `clcTiles`. */
export interface ClcTilesOptions {
  /** Row blocks per L2 group (`GROUP_M`). */
  readonly groupM: number;
}

/**
 * Cluster launch control (sm_100a only): one program per tile; each program starts on the
 * tile of its own id, and the issuer task asks the hardware to cancel a program that has
 * not started yet (`clusterlaunchcontrol.try_cancel`) and take its tile. The response
 * (the cancelled program's id, -1 when none is left) lands in shared memory behind an
 * mbarrier; every task reads it (`tlx.clc_consumer`) at the end of its tile, and the
 * issuer waits until all tasks have read the previous response before the next request
 * (`tlx.clc_producer`, context with `num_consumers` = tasks). Tile ids map to (pid_m,
 * pid_n) by the same `GROUP_M` grouping as `groupedTiles`.
 */
export function clcTiles(o: ClcTilesOptions): TlxSchedulePart {
  const GROUP_M = checkPositive(o.groupM, "groupM");
  return {
    name: "clc-tiles",
    args: [],
    constexprs: { GROUP_M },
    expect: ["clusterlaunchcontrol\\.try_cancel", "clusterlaunchcontrol\\.query_cancel"],
    launch: "per-tile",
    target: "sm_100a",
    writeSetup(w, tasks) {
      w.line(`clc = tlx.clc_create_context(num_consumers=${checkPositive(tasks, "tasks")})`);
    },
    writeTileLoop(w, body, role) {
      w.line("num_pid_in_group = GROUP_M * num_pid_n");
      w.line("tile_id = tl.program_id(0)");
      if (role?.issuer === true) w.line("clc_issue_phase = 1");
      w.line("clc_phase = 0");
      w.block("while tile_id != -1", (l) => {
        if (role?.issuer === true) {
          l.comment("Ask for the next tile now; the response is read at the end of this one.");
          l.line("tlx.clc_producer(clc, clc_issue_phase)");
          l.line("clc_issue_phase ^= 1");
        }
        writeGroupedPids(l);
        l.line("pid_m = visit_m");
        body(l);
        l.line("tile_id = tlx.clc_consumer(clc, clc_phase)");
        l.line("clc_phase ^= 1");
      });
    },
  };
}
