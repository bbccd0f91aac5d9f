// The core of lowering: per rank, plain per-tile tables (visit order, wave, and the
// slots each tile waits on or notifies). Everything here is number arrays; turning
// them into @ovl/mapping index maps is a separate, thin step (index-maps.ts).
import type { ChunkPlan, Region, SignalSlot, TensorDecl } from "../model/schema.js";
import { coverage, formatRegion } from "../region/index.js";
import { chunkArrivalOrder, tileDoneNeedOrder } from "./arrival-order.js";
import { TileScheduleError } from "./errors.js";
import { groupedOrder, type TileCoord } from "./swizzle.js";
import { tileRegion, tileSpan, type ComputeTiling, type TileGrid, type TileRole } from "./tiling.js";

type Signals = NonNullable<ChunkPlan["signals"]>;

/**
 * One rank's schedule as raw tables, all indexed by the visit step `v` (the kernel's
 * linear tile counter; a persistent program `p` runs `v = p, p + numSms, ...`).
 * Wait and notify sets are ragged, so they are stored as `width` columns padded with
 * slot -1 (and arrivals 0): column `j` holds each tile's `j`-th slot.
 */
export interface RankTables {
  rank: number;
  /** Consumer: chunk slots in arrival order. Producer: tile-done slots in the order the plan needs them. */
  slotOrder: number[];
  /** The slots the tables refer to; a producer's tile-done `arrivals` are its tile counts. */
  slots: SignalSlot[];
  tile: number[];
  pidM: number[];
  pidN: number[];
  /** Consumer: 0 = needs no remote chunk, k = released by `slotOrder[k-1]`. Producer: k = first needed by `slotOrder[k]`, `slotOrder.length` = by nothing. */
  wave: number[];
  waitSlot: number[][];
  waitArrivals: number[][];
  notifySlot: number[][];
}

/** The fixed inputs of lowering one plan against one tiling. */
export interface LoweringContext {
  plan: ChunkPlan;
  signals: Signals;
  ends: ReadonlyMap<string, number>;
  tiling: ComputeTiling;
  tensor: TensorDecl;
  grid: TileGrid;
}

/**
 * Consumer tables (AllGather + GEMM): each tile waits on every chunk slot whose region
 * meets the rows it reads; waves follow chunk arrival, the tiles needing no remote chunk
 * (the local shard) first, and a tile spanning chunks joins the wave of the last of them.
 *
 * @throws {TileScheduleError} `uncovered-tile` when the rank neither holds nor receives
 *   rows a tile reads.
 */
export function consumerTables(ctx: LoweringContext, rank: number): RankTables {
  const { plan, signals, ends, tiling, tensor, grid } = ctx;
  const order = chunkArrivalOrder(plan, signals, ends, rank, tensor.name);
  const position = new Map(order.map((s, i) => [s.slot, i]));
  const local = (plan.ranks.find((r) => r.rank === rank)?.local ?? []).filter((r) => r.tensor === tensor.name);

  // A consumer tile reads whole rows, so its waits depend on pidM only.
  const rowWaits: SignalSlot[][] = Array.from({ length: grid.numPidM }, () => []);
  for (const s of [...order].sort((a, b) => a.slot - b.slot)) {
    const { m0, m1 } = tileSpan(s.region as Region, tiling, "consumer", grid);
    for (let m = m0; m <= m1; m++) rowWaits[m]?.push(s);
  }
  const rowWave: number[] = [];
  for (let m = 0; m < grid.numPidM; m++) {
    const rows = tileRegion(tiling, tensor, "consumer", m, 0);
    const waits = rowWaits[m] ?? [];
    const { gaps } = coverage([...local, ...waits.map((s) => s.region as Region)], rows);
    if (gaps.length > 0) {
      throw new TileScheduleError(
        "uncovered-tile",
        `rank ${rank}: tile row ${m} reads ${formatRegion(rows)}, but the rank neither holds (local) nor receives ` +
          `${gaps.map(formatRegion).join(", ")}; add the missing transfers to plan "${plan.name}" or check tiling.problem.M`,
      );
    }
    rowWave.push(waits.length === 0 ? 0 : 1 + Math.max(...waits.map((s) => position.get(s.slot) ?? 0)));
  }
  const visits = visitOrder(grid, tiling.groupSizeM, (t) => rowWave[t.pidM] ?? 0);
  const width = Math.max(0, ...rowWaits.map((w) => w.length));
  const waitSlot = columns(width, visits, (t) => rowWaits[t.pidM]?.map((s) => s.slot) ?? [], -1);
  const waitArrivals = columns(width, visits, (t) => rowWaits[t.pidM]?.map((s) => s.arrivals) ?? [], 0);
  return {
    rank,
    slotOrder: order.map((s) => s.slot),
    slots: [...order].sort((a, b) => a.slot - b.slot),
    ...coords(grid, visits),
    wave: visits.map((t) => rowWave[t.pidM] ?? 0),
    waitSlot,
    waitArrivals,
    notifySlot: [],
  };
}

/**
 * Producer tables (GEMM + ReduceScatter / AllReduce): each tile notifies every tile-done
 * slot whose region meets the tile it writes; a slot's arrivals are the number of such
 * tiles. Tiles are computed in the order the plan sends their chunks.
 */
export function producerTables(ctx: LoweringContext, rank: number): RankTables {
  const { plan, signals, ends, tiling, tensor, grid } = ctx;
  const order = tileDoneNeedOrder(plan, signals, ends, rank, tensor.name);
  const position = new Map(order.map((s, i) => [s.slot, i]));
  const notifies: SignalSlot[][] = Array.from({ length: grid.numTiles }, () => []);
  const counts = new Map<number, number>();
  for (const s of [...order].sort((a, b) => a.slot - b.slot)) {
    const { m0, m1, n0, n1 } = tileSpan(s.region as Region, tiling, "producer", grid);
    for (let m = m0; m <= m1; m++) {
      for (let n = n0; n <= n1; n++) notifies[m * grid.numPidN + n]?.push(s);
    }
    counts.set(s.slot, Math.max(0, m1 - m0 + 1) * Math.max(0, n1 - n0 + 1));
  }
  const notifyOf = (t: TileCoord) => notifies[t.pidM * grid.numPidN + t.pidN] ?? [];
  const waveOf = (t: TileCoord) => Math.min(order.length, ...notifyOf(t).map((s) => position.get(s.slot) ?? order.length));
  const visits = visitOrder(grid, tiling.groupSizeM, waveOf);
  const width = Math.max(0, ...notifies.map((s) => s.length));
  return {
    rank,
    slotOrder: order.map((s) => s.slot),
    slots: order
      .map((s) => ({ ...s, arrivals: counts.get(s.slot) ?? 0 }))
      .filter((s) => s.arrivals > 0)
      .sort((a, b) => a.slot - b.slot),
    ...coords(grid, visits),
    wave: visits.map(waveOf),
    waitSlot: [],
    waitArrivals: [],
    notifySlot: columns(width, visits, (t) => notifyOf(t).map((s) => s.slot), -1),
  };
}

/** Lower one rank in the given role. */
export function rankTables(ctx: LoweringContext, role: TileRole, rank: number): RankTables {
  return role === "consumer" ? consumerTables(ctx, rank) : producerTables(ctx, rank);
}

/** All tiles, waves in increasing order, each wave in grouped (L2) order. */
function visitOrder(grid: TileGrid, groupSizeM: number, waveOf: (t: TileCoord) => number): TileCoord[] {
  const waves = new Map<number, TileCoord[]>();
  for (let m = 0; m < grid.numPidM; m++) {
    for (let n = 0; n < grid.numPidN; n++) {
      const t = { pidM: m, pidN: n };
      const w = waveOf(t);
      const list = waves.get(w) ?? [];
      list.push(t);
      waves.set(w, list);
    }
  }
  return [...waves.keys()].sort((a, b) => a - b).flatMap((w) => groupedOrder(waves.get(w) ?? [], groupSizeM));
}

function coords(grid: TileGrid, visits: readonly TileCoord[]): Pick<RankTables, "tile" | "pidM" | "pidN"> {
  return {
    tile: visits.map((t) => t.pidM * grid.numPidN + t.pidN),
    pidM: visits.map((t) => t.pidM),
    pidN: visits.map((t) => t.pidN),
  };
}

function columns(width: number, visits: readonly TileCoord[], row: (t: TileCoord) => number[], pad: number): number[][] {
  return Array.from({ length: width }, (_, j) => visits.map((t) => row(t)[j] ?? pad));
}
