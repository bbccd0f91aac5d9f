// lowerToTileSchedule: a chunk plan against a compute kernel's tiling, per rank, to the
// `ovl.tile-schedule/v1` document (AutoOverlap §5.2's chunk-based tile scheduler).
import type { ChunkPlan } from "../model/schema.js";
import { planSignals, worldSize } from "../signals/allocate.js";
import { opEndSteps } from "./arrival-order.js";
import { TileScheduleError } from "./errors.js";
import { tableToIndexMap, VISIT_VARIABLE } from "./index-maps.js";
import { TILE_SCHEDULE_SCHEMA, type RankTileSchedule, type TileMaps, type TileSchedule } from "./schema.js";
import { rankTables, type LoweringContext, type RankTables } from "./tables.js";
import { resolveTiling, type ComputeTilingInput, type TileRole } from "./tiling.js";

/** Options of {@link lowerToTileSchedule}. */
export interface LowerOptions {
  /**
   * `consumer` (the kernel reads `tiling.tensor`, waiting on chunk slots: AllGather+GEMM)
   * or `producer` (it writes it, notifying tile-done slots: GEMM+ReduceScatter/AllReduce).
   * Default: producer when some op of the plan depends on compute over that tensor.
   */
  role?: TileRole;
}

/**
 * Lower `plan` against `tiling` to a tile schedule for every rank of the mesh.
 *
 * Consumer: "we reorder the sequence of waves so that each chunk is consumed as soon as
 * it arrives, and apply an intra-chunk swizzle that visits tiles in an order that
 * preserves locality within the chunk" (AutoOverlap §5.2): tiles needing only local
 * rows come first, then one wave per arriving chunk (arrival order from stream order and
 * dependencies), each wave in grouped order by `groupSizeM`; every tile waits on
 * exactly the chunk slots its rows meet (target `epoch × arrivals`).
 * Producer: tiles of the chunk the plan sends first are computed first; each tile
 * notifies every tile-done slot its output meets, and each slot's arrivals is the number
 * of tiles notifying it.
 *
 * Uses `plan.signals` when present (so hand-numbered slots are honoured), else
 * {@link planSignals}. Every table is also given as an @ovl/mapping index map over `v`.
 *
 * @throws {TileScheduleError} for a bad tiling, a tensor the plan lacks, a shape that does
 *   not match, unknown or cyclic dependencies, slots nobody fills, or tiles whose rows
 *   the rank never holds; {SignalError} when signals cannot be allocated.
 */
export function lowerToTileSchedule(plan: ChunkPlan, tiling: ComputeTilingInput, options: LowerOptions = {}): TileSchedule {
  const role = options.role ?? inferRole(plan, tiling.tensor);
  const resolved = resolveTiling(plan, tiling, role);
  const signals = plan.signals ?? planSignals(plan).signals;
  if (signals === undefined) {
    throw new TileScheduleError("missing-signals", `plan "${plan.name}" has no signals and none could be allocated`);
  }
  const ctx: LoweringContext = { plan, signals, ends: opEndSteps(plan), ...resolved };
  const { grid } = resolved;
  const programs = resolved.tiling.persistent === null ? grid.numTiles : Math.min(resolved.tiling.persistent.numSms, grid.numTiles);
  const ranks = Array.from({ length: worldSize(plan) }, (_, rank) => toRankSchedule(rankTables(ctx, role, rank)));
  return {
    $schema: TILE_SCHEDULE_SCHEMA,
    plan: plan.name,
    role,
    tiling: resolved.tiling,
    grid: { ...grid, programs, rounds: Math.ceil(grid.numTiles / programs) },
    visitVariable: VISIT_VARIABLE,
    ranks,
  };
}

/**
 * The plan with each tile-done slot's `arrivals` set to the number of tiles that notify
 * it in a producer `schedule` (planSignals leaves 1 there, not knowing the tiling), so
 * comm ops waiting on compute use the right `epoch × arrivals` target.
 */
export function applyTileArrivals(plan: ChunkPlan, schedule: TileSchedule): ChunkPlan {
  if (schedule.role !== "producer") {
    throw new TileScheduleError("bad-role", `only a producer schedule notifies tile-done slots; this one is a ${schedule.role}`);
  }
  const signals = plan.signals ?? planSignals(plan).signals;
  if (signals === undefined) {
    throw new TileScheduleError("missing-signals", `plan "${plan.name}" has no signals and none could be allocated`);
  }
  const counts = new Map(schedule.ranks.map((r) => [r.rank, new Map(r.slots.map((s) => [s.slot, s.arrivals]))]));
  return {
    ...plan,
    signals: {
      ...signals,
      slots: signals.slots.map((entry) => ({
        rank: entry.rank,
        slots: entry.slots.map((s) => {
          const arrivals = s.purpose === "tile-done" ? counts.get(entry.rank)?.get(s.slot) : undefined;
          return arrivals === undefined ? s : { ...s, arrivals };
        }),
      })),
    },
  };
}

function inferRole(plan: ChunkPlan, tensor: string): TileRole {
  const produced = plan.ranks.some((r) =>
    r.streams.some((ops) => ops.some((op) => op.deps.some((d) => d.kind === "compute" && d.region.tensor === tensor))),
  );
  return produced ? "producer" : "consumer";
}

function toRankSchedule(t: RankTables): RankTileSchedule {
  const name = (what: string) => `r${t.rank}_${what}`;
  const maps: TileMaps = {
    tile: tableToIndexMap(name("tile"), t.tile),
    pidM: tableToIndexMap(name("pid_m"), t.pidM),
    pidN: tableToIndexMap(name("pid_n"), t.pidN),
    wave: tableToIndexMap(name("wave"), t.wave),
    waitSlot: t.waitSlot.map((col, j) => tableToIndexMap(name(`wait_slot${j}`), col)),
    waitArrivals: t.waitArrivals.map((col, j) => tableToIndexMap(name(`wait_arrivals${j}`), col)),
    notifySlot: t.notifySlot.map((col, j) => tableToIndexMap(name(`notify_slot${j}`), col)),
  };
  return {
    rank: t.rank,
    slotOrder: t.slotOrder,
    slots: t.slots,
    tables: {
      tile: t.tile,
      pidM: t.pidM,
      pidN: t.pidN,
      wave: t.wave,
      waitSlot: t.waitSlot,
      waitArrivals: t.waitArrivals,
      notifySlot: t.notifySlot,
    },
    maps,
  };
}
