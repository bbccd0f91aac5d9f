// From a tile schedule's per-rank tables to the @ovl/mapping index maps a transformed kernel
// prints (TileLink §4.1): a map that is one (modular-)affine expression over (index, rank)
// on every rank is printed inline; any other becomes a per-rank lookup table the kernel loads.
import { dynamicMap, lookupTable, recoverRankAffine, staticMap, toPython, variable, type Expr, type IndexMap } from "@ovl/mapping";
import type { RankTileSchedule, TileSchedule } from "@ovl/chunk-plan";
import { SIGNAL_BUFFER } from "../backends/triton/common.js";
import { DOMAIN_VARIABLE } from "../local/program.js";
import type { KernelArg, Table } from "../core/manifest/schema.js";
import { EmitError } from "../core/writer/index.js";

/** The rank variable every rank-generic expression is printed over (an inserted kernel parameter). */
export const RANK_VAR = "ovl_rank";

/** A map and, when it reads a table, that table's per-rank values for the manifest. */
export interface BuiltMap {
  readonly map: IndexMap;
  readonly table?: Table;
}

/**
 * `perRank[r][i]` as a map over `index` (a variable named `indexName`, `0 <= i < length`):
 * an expression over (`indexName`, `ovl_rank`) when one fits every rank exactly and prints in
 * Triton (non-negative dividends), else `tl.load(tableName + i)` over a per-rank int32 table.
 * @throws {EmitError} `bad-schedule` when the ranks' tables differ in length or are empty.
 */
export function rankMap(tableName: string, perRank: readonly (readonly number[])[], indexName: string): BuiltMap {
  const length = perRank[0]?.length ?? 0;
  if (length === 0 || perRank.some((t) => t.length !== length)) {
    throw new EmitError(
      "bad-schedule",
      `table ${tableName}: every rank needs a table of one non-zero length, got ${perRank.map((t) => t.length).join(", ")}`,
    );
  }
  const index = variable(indexName, { min: 0, max: length - 1 });
  const rank = variable(RANK_VAR, { min: 0, max: perRank.length - 1 });
  const expr = recoverRankAffine(perRank, index, rank);
  if (expr !== undefined && printsInTriton(expr)) return { map: staticMap(expr) };
  return {
    map: dynamicMap(lookupTable(tableName, length), index),
    table: { name: tableName, dtype: "int32", values: perRank.map((t) => [...t]) },
  };
}

/** Whether Triton can compute `e` exactly: the printer refuses divisions Triton would truncate. */
function printsInTriton(e: Expr): boolean {
  try {
    toPython(e, { dialect: "triton" });
    return true;
  } catch {
    return false;
  }
}

/** One rank's consumer tables per m-block: the visit order and the slot columns. */
export interface ConsumerColumns {
  /** m-blocks in the order the schedule first visits them. */
  readonly order: number[];
  /** `slots[j][m]`: the j-th chunk slot m-block m waits on (-1 = none); ragged sets padded. */
  readonly slots: number[][];
  /** `arrivals[j][m]`: that slot's arrivals (0 where -1). */
  readonly arrivals: number[][];
}

/**
 * A consumer schedule reduced to m-blocks: a consumer tile reads whole rows, so every tile of
 * an m-block waits on the same slots — possibly several, where chunks do not fall on tile
 * boundaries. `width` pads to a common column count across ranks.
 * @throws {EmitError} `bad-schedule` when the order misses or repeats an m-block, or tiles of
 *   one m-block disagree on their slots.
 */
export function consumerColumns(rank: RankTileSchedule, numPidM: number, width: number): ConsumerColumns {
  const { pidM, waitSlot, waitArrivals } = rank.tables;
  const sets = new Array<number[] | undefined>(numPidM).fill(undefined);
  const arr = new Array<number[] | undefined>(numPidM).fill(undefined);
  const order: number[] = [];
  pidM.forEach((m, v) => {
    if (!Number.isInteger(m) || m < 0 || m >= numPidM) {
      throw new EmitError("bad-schedule", `rank ${rank.rank}: visit ${v} names m-block ${m}, outside 0..${numPidM - 1}`);
    }
    const named: number[] = [];
    const arrivals: number[] = [];
    waitSlot.forEach((col, j) => {
      const s = col[v] ?? -1;
      if (s >= 0) {
        named.push(s);
        arrivals.push(waitArrivals[j]?.[v] ?? 0);
      }
    });
    const prev = sets[m];
    if (prev === undefined) {
      order.push(m);
      sets[m] = named;
      arr[m] = arrivals;
    } else if (prev.join(",") !== named.join(",")) {
      throw new EmitError(
        "bad-schedule",
        `rank ${rank.rank}: tiles of m-block ${m} wait on slots [${prev.join(", ")}] and [${named.join(", ")}]; a consumer tile reads whole rows`,
      );
    }
  });
  if (order.length !== numPidM)
    throw new EmitError("bad-schedule", `rank ${rank.rank}: the schedule visits ${order.length} of ${numPidM} m-blocks`);
  const cols = Math.max(width, ...sets.map((s) => s?.length ?? 0));
  return {
    order,
    slots: Array.from({ length: cols }, (_, j) => sets.map((s) => s?.[j] ?? -1)),
    arrivals: Array.from({ length: cols }, (_, j) => arr.map((s) => s?.[j] ?? 0)),
  };
}

/** The widest slot set of any m-block on any rank of a consumer schedule. */
export function consumerWidth(ranks: readonly RankTileSchedule[]): number {
  return Math.max(1, ...ranks.map((r) => r.tables.waitSlot.length));
}

/**
 * Every rank's consumer columns of `schedule` over `blocks` blocks, in rank order, padded to
 * one `width`, for copy-engine deliveries: a slot is written once per launch, so a block that
 * waits for more arrivals of one is refused. `block` names a block in that error (`m-block`,
 * `kv block`, `row`).
 * @throws {EmitError} `bad-schedule`, and as {@link consumerColumns}.
 */
export function copyEngineColumns(schedule: TileSchedule, blocks: number, block: string): { cols: ConsumerColumns[]; width: number } {
  const ranks = schedule.ranks.slice().sort((a, b) => a.rank - b.rank);
  const width = consumerWidth(ranks);
  const cols = ranks.map((r) => consumerColumns(r, blocks, width));
  cols.forEach((c, r) =>
    c.arrivals.forEach((col) =>
      col.forEach((a, b) => {
        if (a > 1)
          throw new EmitError(
            "bad-schedule",
            `rank ${r}: ${block} ${b} waits for ${a} arrivals; copy-engine chunk slots are written once per launch (arrivals 1)`,
          );
      }),
    ),
  );
  return { cols, width };
}

/** The maps a consumer body prints from its columns: the visit order and the `width` slot columns, over `ovl_m`. */
export function consumerMaps(cols: readonly ConsumerColumns[], width: number): { order: BuiltMap; slots: BuiltMap[] } {
  const order = rankMap(
    "ovl_order",
    cols.map((c) => c.order),
    DOMAIN_VARIABLE.consumer,
  );
  const slots = Array.from({ length: width }, (_, j) =>
    rankMap(
      `ovl_wait${j}`,
      cols.map((c) => c.slots[j]!),
      DOMAIN_VARIABLE.consumer,
    ),
  );
  return { order, slots };
}

/** The tables of built maps (those that are dynamic), for the manifest. */
export function tablesOf(maps: readonly BuiltMap[]): Table[] {
  return maps.flatMap((m) => (m.table === undefined ? [] : [m.table]));
}

/**
 * The arguments of the parameters the transformation inserts into a consumer: its map tables,
 * then the signal buffer and the bounded wait's error buffer, rank, epoch word and timeout.
 */
export function consumerInsertedArgs(tables: readonly Table[]): Record<string, KernelArg> {
  return {
    ...Object.fromEntries(tables.map((x) => [x.name, { kind: "table" as const, name: x.name }])),
    ovl_sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
    ovl_err_ptr: { kind: "error-buffer" },
    [RANK_VAR]: { kind: "rank" },
    ovl_epoch_ptr: { kind: "epoch-word" },
    ovl_timeout_ns: { kind: "timeout-ns" },
  };
}
