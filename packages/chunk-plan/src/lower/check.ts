// checkTileSchedule: an independent check of a tile schedule against its plan (one the
// lowering wrote, or one a user brought): every tile visited once, wait and notify sets
// exactly the slots each tile meets, arrivals consistent, waves following arrival.
import type { IndexMap } from "@ovl/mapping";
import type { ChunkPlan, Region, SignalSlot, TensorDecl } from "../model/schema.js";
import { planSignals, worldSize } from "../signals/allocate.js";
import { coverage } from "../region/index.js";
import { regionsIntersect } from "../signals/regions.js";
import { chunkArrivalOrder, opEndSteps, tileDoneNeedOrder } from "./arrival-order.js";
import { indexMapMatches } from "./index-maps.js";
import type { RankTileSchedule, TileSchedule } from "./schema.js";
import { resolveTiling, tileRegion, type ComputeTiling, type TileGrid } from "./tiling.js";

/** Kinds of defect {@link checkTileSchedule} reports. */
export type TileScheduleIssueCode =
  | "plan"
  | "rank-set"
  | "grid"
  | "table-length"
  | "not-a-permutation"
  | "coords"
  | "map-mismatch"
  | "slot-order"
  | "wave-order"
  | "wait-set"
  | "wait-arrivals"
  | "uncovered"
  | "notify-set"
  | "notify-count";

/** One defect of a schedule, located by rank and, where it applies, visit step. */
export interface TileScheduleIssue {
  readonly code: TileScheduleIssueCode;
  readonly rank?: number;
  readonly visit?: number;
  readonly message: string;
}

/**
 * Check `schedule` against `plan`; an empty list means it is sound. Checks, per rank:
 * every tile visited exactly once and its coordinates consistent; every index map
 * reproduces its table; consumer: each tile waits on exactly the chunk slots its rows
 * meet (no more: an extra wait may be on a slot filled only later; no fewer: a missing
 * one reads data in flight), with the slots' arrivals as targets, its rows covered by
 * local regions and those slots, and waves following the plan's arrival order;
 * producer: each tile notifies exactly the tile-done slots its output meets, and each
 * slot's arrivals equals the number of tiles notifying it.
 */
export function checkTileSchedule(schedule: TileSchedule, plan: ChunkPlan): TileScheduleIssue[] {
  const issues: TileScheduleIssue[] = [];
  let resolved: ReturnType<typeof resolveTiling>;
  let signals: NonNullable<ChunkPlan["signals"]>;
  let ends: Map<string, number>;
  try {
    resolved = resolveTiling(plan, schedule.tiling, schedule.role);
    signals = plan.signals ?? (planSignals(plan).signals as NonNullable<ChunkPlan["signals"]>);
    ends = opEndSteps(plan);
  } catch (e) {
    return [{ code: "plan", message: `cannot check against plan "${plan.name}": ${(e as Error).message}` }];
  }
  const { grid, tensor, tiling } = resolved;
  if (schedule.grid.numPidM !== grid.numPidM || schedule.grid.numPidN !== grid.numPidN || schedule.grid.numTiles !== grid.numTiles) {
    issues.push({
      code: "grid",
      message: `grid ${schedule.grid.numPidM}×${schedule.grid.numPidN} ≠ ${grid.numPidM}×${grid.numPidN} implied by the tiling`,
    });
    return issues;
  }
  const world = worldSize(plan);
  const ranks = schedule.ranks.map((r) => r.rank).sort((a, b) => a - b);
  if (ranks.length !== world || ranks.some((r, i) => r !== i)) {
    issues.push({ code: "rank-set", message: `schedule has ranks [${ranks.join(",")}]; the mesh has ranks 0..${world - 1}, each once` });
  }
  for (const rs of schedule.ranks) {
    if (rs.rank >= world) continue;
    const before = issues.length;
    checkShape(rs, grid, issues);
    if (issues.length > before) continue;
    const slots = signals.slots.find((s) => s.rank === rs.rank)?.slots ?? [];
    const ctx = { plan, tiling, tensor, grid, rs, slots, issues };
    try {
      if (schedule.role === "consumer") {
        checkConsumer(ctx, chunkArrivalOrder(plan, signals, ends, rs.rank, tensor.name));
      } else {
        checkProducer(ctx, tileDoneNeedOrder(plan, signals, ends, rs.rank, tensor.name));
      }
    } catch (e) {
      issues.push({ code: "plan", rank: rs.rank, message: (e as Error).message });
    }
  }
  return issues;
}

interface RankCheck {
  plan: ChunkPlan;
  tiling: ComputeTiling;
  tensor: TensorDecl;
  grid: TileGrid;
  rs: RankTileSchedule;
  slots: readonly SignalSlot[];
  issues: TileScheduleIssue[];
}

function checkShape(rs: RankTileSchedule, grid: TileGrid, issues: TileScheduleIssue[]): void {
  const { tables, maps } = rs;
  const named: [string, number[]][] = [
    ["tile", tables.tile],
    ["pidM", tables.pidM],
    ["pidN", tables.pidN],
    ["wave", tables.wave],
    ...tables.waitSlot.map((c, j): [string, number[]] => [`waitSlot[${j}]`, c]),
    ...tables.waitArrivals.map((c, j): [string, number[]] => [`waitArrivals[${j}]`, c]),
    ...tables.notifySlot.map((c, j): [string, number[]] => [`notifySlot[${j}]`, c]),
  ];
  for (const [what, table] of named) {
    if (table.length !== grid.numTiles) {
      issues.push({
        code: "table-length",
        rank: rs.rank,
        message: `${what} has ${table.length} entries, not one per tile (${grid.numTiles})`,
      });
    }
  }
  if (tables.waitSlot.length !== tables.waitArrivals.length) {
    issues.push({ code: "table-length", rank: rs.rank, message: "waitSlot and waitArrivals have different widths" });
  }
  if (issues.some((i) => i.rank === rs.rank)) return;
  const seen = new Array<number>(grid.numTiles).fill(0);
  tables.tile.forEach((t, v) => {
    if (t >= 0 && t < grid.numTiles) seen[t] = (seen[t] ?? 0) + 1;
    const m = tables.pidM[v] ?? -1;
    const n = tables.pidN[v] ?? -1;
    if (m < 0 || m >= grid.numPidM || n < 0 || n >= grid.numPidN || t !== m * grid.numPidN + n) {
      issues.push({ code: "coords", rank: rs.rank, visit: v, message: `visit ${v}: tile ${t} ≠ pidM ${m} × ${grid.numPidN} + pidN ${n}` });
    }
  });
  seen.forEach((count, t) => {
    if (count !== 1) {
      issues.push({
        code: "not-a-permutation",
        rank: rs.rank,
        message: `tile ${t} is visited ${count} times on rank ${rs.rank}; every tile must be visited exactly once`,
      });
    }
  });
  const mapped: [string, TileMapLike | undefined, number[]][] = [
    ["tile", maps.tile, tables.tile],
    ["pidM", maps.pidM, tables.pidM],
    ["pidN", maps.pidN, tables.pidN],
    ["wave", maps.wave, tables.wave],
    ...tables.waitSlot.map((c, j): [string, TileMapLike | undefined, number[]] => [`waitSlot[${j}]`, maps.waitSlot[j], c]),
    ...tables.waitArrivals.map((c, j): [string, TileMapLike | undefined, number[]] => [`waitArrivals[${j}]`, maps.waitArrivals[j], c]),
    ...tables.notifySlot.map((c, j): [string, TileMapLike | undefined, number[]] => [`notifySlot[${j}]`, maps.notifySlot[j], c]),
  ];
  for (const [what, map, table] of mapped) {
    if (map === undefined || !indexMapMatches(map, table)) {
      issues.push({ code: "map-mismatch", rank: rs.rank, message: `the index map of ${what} does not reproduce its table` });
    }
  }
}

type TileMapLike = IndexMap;

/** Slots listed in the padded columns at visit `v` (-1 = none). */
function listed(columns: readonly number[][], v: number): number[] {
  return columns.map((c) => c[v] ?? -1).filter((s) => s >= 0);
}

function sameSet(a: readonly number[], b: readonly number[]): boolean {
  const sa = [...a].sort((x, y) => x - y);
  const sb = [...b].sort((x, y) => x - y);
  return sa.length === sb.length && sa.every((x, i) => x === sb[i]);
}

function checkOrder(c: RankCheck, expectedOrder: readonly number[], expectedWave: (v: number) => number): void {
  const { rs, issues } = c;
  if (!sameSet(rs.slotOrder, expectedOrder) || rs.slotOrder.some((s, i) => s !== expectedOrder[i])) {
    issues.push({
      code: "slot-order",
      rank: rs.rank,
      message: `slotOrder [${rs.slotOrder.join(",")}] ≠ the plan's order [${expectedOrder.join(",")}]`,
    });
  }
  rs.tables.wave.forEach((w, v) => {
    const want = expectedWave(v);
    if (w !== want) {
      issues.push({
        code: "wave-order",
        rank: rs.rank,
        visit: v,
        message: `visit ${v} (tile ${rs.tables.tile[v]}) is in wave ${w}; its slots put it in wave ${want}`,
      });
    } else if (v > 0 && w < (rs.tables.wave[v - 1] ?? 0)) {
      issues.push({
        code: "wave-order",
        rank: rs.rank,
        visit: v,
        message: `visit ${v} (wave ${w}) comes after a tile of a later wave: waves must follow arrival order`,
      });
    }
  });
}

function checkConsumer(c: RankCheck, order: readonly SignalSlot[]): void {
  const { plan, tiling, tensor, rs, issues } = c;
  const position = new Map(order.map((s, i) => [s.slot, i]));
  const bySlot = new Map(order.map((s) => [s.slot, s]));
  const local = (plan.ranks.find((r) => r.rank === rs.rank)?.local ?? []).filter((r) => r.tensor === tensor.name);
  rs.tables.tile.forEach((_t, v) => {
    const rows = tileRegion(tiling, tensor, "consumer", rs.tables.pidM[v] ?? 0, 0);
    const want = order.filter((s) => regionsIntersect(s.region as Region, rows)).map((s) => s.slot);
    const got = listed(rs.tables.waitSlot, v);
    if (!sameSet(got, want)) {
      issues.push({
        code: "wait-set",
        rank: rs.rank,
        visit: v,
        message: `visit ${v} (tile ${rs.tables.tile[v]}) waits on slots [${got.join(",")}]; its rows meet chunk slots [${want.join(",")}]`,
      });
    }
    rs.tables.waitSlot.forEach((col, j) => {
      const slot = col[v] ?? -1;
      const target = rs.tables.waitArrivals[j]?.[v];
      const expected = slot < 0 ? 0 : bySlot.get(slot)?.arrivals;
      if (target !== expected) {
        issues.push({
          code: "wait-arrivals",
          rank: rs.rank,
          visit: v,
          message: `visit ${v} waits on slot ${slot} for ${target} arrivals per epoch; the slot has ${expected ?? "no such slot"}`,
        });
      }
    });
    const covering = [...local, ...got.flatMap((s) => (bySlot.get(s)?.region ? [bySlot.get(s)?.region as Region] : []))];
    if (coverage(covering, rows).gaps.length > 0) {
      issues.push({ code: "uncovered", rank: rs.rank, visit: v, message: `visit ${v} reads rows the rank neither holds nor waits for` });
    }
  });
  const waveOf = (v: number) => {
    const got = listed(rs.tables.waitSlot, v);
    return got.length === 0 ? 0 : 1 + Math.max(...got.map((s) => position.get(s) ?? Number.POSITIVE_INFINITY));
  };
  checkOrder(
    c,
    order.map((s) => s.slot),
    waveOf,
  );
}

function checkProducer(c: RankCheck, order: readonly SignalSlot[]): void {
  const { tiling, tensor, rs, issues } = c;
  const position = new Map(order.map((s, i) => [s.slot, i]));
  const counts = new Map<number, number>();
  rs.tables.tile.forEach((_t, v) => {
    const out = tileRegion(tiling, tensor, "producer", rs.tables.pidM[v] ?? 0, rs.tables.pidN[v] ?? 0);
    const want = order.filter((s) => regionsIntersect(s.region as Region, out)).map((s) => s.slot);
    const got = listed(rs.tables.notifySlot, v);
    if (!sameSet(got, want)) {
      issues.push({
        code: "notify-set",
        rank: rs.rank,
        visit: v,
        message: `visit ${v} (tile ${rs.tables.tile[v]}) notifies slots [${got.join(",")}]; its output meets tile-done slots [${want.join(",")}]`,
      });
    }
    for (const s of got) counts.set(s, (counts.get(s) ?? 0) + 1);
  });
  const declared = new Map(rs.slots.map((s) => [s.slot, s.arrivals]));
  for (const s of order) {
    const n = counts.get(s.slot) ?? 0;
    if (declared.get(s.slot) !== n) {
      issues.push({
        code: "notify-count",
        rank: rs.rank,
        message: `tile-done slot ${s.slot} is notified by ${n} tiles but declares ${declared.get(s.slot) ?? "no"} arrivals: its waiters would ${n < (declared.get(s.slot) ?? 0) ? "hang" : "wake early"}`,
      });
    }
  }
  const waveOf = (v: number) => Math.min(order.length, ...listed(rs.tables.notifySlot, v).map((s) => position.get(s) ?? order.length));
  checkOrder(
    c,
    order.map((s) => s.slot),
    waveOf,
  );
}
