// Simulation of one rank's compute kernel over its tile schedule: programs (persistent) or
// SM slots (one program per tile) visit tiles in schedule order, each waiting for the
// chunk slots it reads, then taking the calibrated per-tile time.
import type { RankTileSchedule, Region, TileSchedule } from "@ovl/chunk-plan";
import { streamKSplit } from "./cost.js";

/** Simulated tiles of one rank, indexed by visit step `v`, plus per-wave summaries (ms). */
export interface ComputeTiming {
  readonly start: Float64Array;
  readonly end: Float64Array;
  /** End time by tile id. */
  readonly endByTile: Float64Array;
  /** When each tile's notify is issued, by tile id: its end, or with `notifyAt` `"next-tile"` one K step into its program's next tile (the last tile's: when its program ends). */
  readonly notifyByTile: Float64Array;
  readonly computeEnd: number;
  readonly waves: readonly WaveTiming[];
  /** SM-time spent waiting on chunks, divided by the number of lanes (ms). */
  readonly stallMs: number;
}

/** One wave: when its tiles ran and, if they had to wait, from when to when. */
export interface WaveTiming {
  readonly wave: number;
  readonly start: number;
  readonly end: number;
  readonly tiles: number;
  /** Earliest time a lane was free for a tile of this wave, and when its last input arrived. */
  readonly freeAt: number;
  readonly readyAt: number;
}

/** What one rank's compute simulation needs. */
export interface ComputeSimInput {
  readonly schedule: TileSchedule;
  readonly rank: RankTileSchedule;
  /** Time one tile takes on an idle SM (ms). */
  readonly tileMs: number;
  /** When the kernel's first tile may start (launch cost, ms). */
  readonly startMs: number;
  /** SMs the kernel may use. */
  readonly sms: number;
  /** When slot `slot` of this rank reaches its arrivals (ms); 0 when communication is ignored. */
  readonly slotReady: (slot: number) => number;
  /** Sorted, disjoint intervals during which copies move data on this rank. */
  readonly busy: readonly (readonly [number, number])[];
  /** Fractional tile slow-down inside a busy interval. */
  readonly slowdown: number;
  /**
   * A persistent stream-K body (`streamKSplit` of the schedule's tiling): its last wave's tiles
   * run as `split` pieces on programs of their own, a piece its share of the tile's K steps plus
   * storing its fp32 partial (`partialMs`); the last piece of a tile then reads the `split` partials back.
   */
  readonly streamK?: { readonly partialMs: number };
  /**
   * A producer's notifies (default `"tile"`: at each tile's end). `"next-tile"`: a persistent
   * program notifies a tile one K step into its next tile (that tile's end where it has one K step)
   * and its last tile when it ends, as `notifyAt: "next-tile"` compiles it.
   */
  readonly notifyAt?: "tile" | "next-tile";
}

/** Simulate one rank's tiles in its visit order. */
export function simulateCompute(input: ComputeSimInput): ComputeTiming {
  const { schedule, rank } = input;
  const { tables } = rank;
  const n = tables.tile.length;
  const persistent = schedule.tiling.persistent !== null;
  const lanes = Math.max(1, Math.min(schedule.grid.programs, input.sms));
  const free = new Float64Array(lanes).fill(input.startMs);
  const start = new Float64Array(n);
  const end = new Float64Array(n);
  const endByTile = new Float64Array(schedule.grid.numTiles);
  const waves = new Map<number, { start: number; end: number; tiles: number; freeAt: number; readyAt: number }>();
  let stall = 0;
  const programs = schedule.grid.programs;
  const { problem, tile } = schedule.tiling;
  const cut = persistent && input.streamK !== undefined ? streamKSplit(n, programs, problem.K) : { tail: 0, split: 1 };
  const whole = n - cut.tail;
  const kSteps = Math.ceil(problem.K / tile.BK);
  // The tile each persistent program has stored but not yet notified (-1: none); without it a tile notifies at its end.
  const deferred = persistent && input.notifyAt === "next-tile" && cut.tail === 0 ? new Int32Array(lanes).fill(-1) : undefined;
  const notifyByTile = deferred === undefined ? endByTile : new Float64Array(schedule.grid.numTiles);
  for (let v = 0; v < n; v++) {
    let ready = 0;
    for (const column of tables.waitSlot) {
      const slot = column[v] ?? -1;
      if (slot >= 0) ready = Math.max(ready, input.slotReady(slot));
    }
    // A whole tile on its program, or the pieces of a tail tile on theirs (units after the whole tiles).
    const units = v < whole ? [v] : Array.from({ length: cut.split }, (_, j) => whole + (v - whole) * cut.split + j);
    const piece = units.length > 1 ? input.streamK! : undefined;
    const share = piece === undefined ? 1 : Math.ceil(kSteps / cut.split) / kSteps;
    let s = Number.POSITIVE_INFINITY;
    let e = 0;
    let last = 0;
    let laneFree = Number.POSITIVE_INFINITY;
    for (const u of units) {
      const lane = persistent ? (u % programs) % lanes : earliestLane(free);
      const us = Math.max(free[lane]!, ready);
      const ue = us + input.tileMs * share * (inBusy(input.busy, us) ? 1 + input.slowdown : 1) + (piece?.partialMs ?? 0);
      stall += us - free[lane]!;
      laneFree = Math.min(laneFree, free[lane]!);
      free[lane] = ue;
      s = Math.min(s, us);
      if (ue >= e) [e, last] = [ue, lane];
    }
    // The last piece adds the partials and stores the tile.
    if (piece !== undefined) {
      e += cut.split * piece.partialMs;
      free[last] = e;
    }
    const duration = e - s;
    start[v] = s;
    end[v] = e;
    endByTile[tables.tile[v]!] = e;
    if (deferred !== undefined) {
      const pending = deferred[last]!;
      if (pending >= 0) notifyByTile[pending] = kSteps > 1 ? s + (e - s) / kSteps : e;
      deferred[last] = tables.tile[v]!;
    }
    const w = tables.wave[v]!;
    const agg = waves.get(w);
    if (agg === undefined) waves.set(w, { start: s, end: s + duration, tiles: 1, freeAt: laneFree, readyAt: ready });
    else {
      agg.start = Math.min(agg.start, s);
      agg.end = Math.max(agg.end, s + duration);
      agg.tiles++;
      agg.freeAt = Math.min(agg.freeAt, laneFree);
      agg.readyAt = Math.max(agg.readyAt, ready);
    }
  }
  let computeEnd = input.startMs;
  for (const t of free) computeEnd = Math.max(computeEnd, t);
  // A program's last tile is notified after its tile loop, when the program ends.
  deferred?.forEach((t, lane) => {
    if (t >= 0) notifyByTile[t] = free[lane]!;
  });
  return {
    start,
    end,
    endByTile,
    notifyByTile,
    computeEnd,
    waves: [...waves.entries()].sort((a, b) => a[0] - b[0]).map(([wave, a]) => ({ wave, ...a })),
    stallMs: stall / lanes,
  };
}

/**
 * When the tiles writing `region` of the tiling's tensor are done: the latest notify of the
 * tiles meeting its rows (axis 0) and columns (axis 1). A region of another tensor waits
 * for the whole kernel, which is the safe answer.
 */
export function regionDoneAt(schedule: TileSchedule, timing: ComputeTiming, region: Region): number {
  const { tiling, grid } = schedule;
  if (region.tensor !== tiling.tensor) return timing.computeEnd;
  const { BM, BN } = tiling.tile;
  const [r0, c0] = [region.offsets[0] ?? 0, region.offsets[1] ?? 0];
  const rows = region.sizes[0] ?? tiling.problem.M;
  const cols = region.sizes.length > 1 ? region.sizes[1]! : tiling.problem.N;
  const pm0 = Math.floor(r0 / BM);
  const pm1 = Math.min(grid.numPidM - 1, Math.floor((r0 + rows - 1) / BM));
  const pn0 = region.sizes.length > 1 ? Math.floor(c0 / BN) : 0;
  const pn1 = region.sizes.length > 1 ? Math.min(grid.numPidN - 1, Math.floor((c0 + cols - 1) / BN)) : grid.numPidN - 1;
  let done = 0;
  for (let m = pm0; m <= pm1; m++) {
    for (let c = pn0; c <= pn1; c++) done = Math.max(done, timing.notifyByTile[m * grid.numPidN + c] ?? timing.computeEnd);
  }
  return done;
}

function earliestLane(free: Float64Array): number {
  let best = 0;
  for (let i = 1; i < free.length; i++) if (free[i]! < free[best]!) best = i;
  return best;
}

function inBusy(busy: readonly (readonly [number, number])[], t: number): boolean {
  let lo = 0;
  let hi = busy.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [a, b] = busy[mid]!;
    if (t < a) hi = mid - 1;
    else if (t >= b) lo = mid + 1;
    else return true;
  }
  return false;
}
