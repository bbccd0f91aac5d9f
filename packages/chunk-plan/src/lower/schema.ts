// The `ovl.tile-schedule/v1` interchange format: per rank, the order a compute kernel
// visits its tiles and the signal slots each tile waits on or notifies, as raw tables
// and as @ovl/mapping index maps. zod schemas are the contract; types are inferred.
import { z } from "zod";
import { IndexMapSchema } from "@ovl/mapping";
import { SignalSlot } from "../model/schema.js";
import { ComputeTiling } from "./tiling.js";

/** Version tag of the tile-schedule interchange format. */
export const TILE_SCHEDULE_SCHEMA = "ovl.tile-schedule/v1" as const;

const Count = z.number().int().nonnegative();
const IntTable = z.array(z.number().int());

/**
 * An @ovl/mapping `IndexMap` over the visit step: `static` (an expression, affine or
 * modular, recovered from the table) or `dynamic` (the table, indexed by an expression).
 */
const IndexMapJson = IndexMapSchema;

/** The per-visit tables of one rank; every table has one entry per tile (`grid.numTiles`). */
export const TileTables = z.object({
  /** Tile id (`pidM * numPidN + pidN`) visited at step `v`. */
  tile: IntTable,
  pidM: IntTable,
  pidN: IntTable,
  /** Consumer: 0 = local rows only, k = released by `slotOrder[k-1]`. Producer: k = first needed by `slotOrder[k]`. */
  wave: IntTable,
  /** Consumer: column j = each tile's j-th wait slot, -1 when it has fewer. */
  waitSlot: z.array(IntTable),
  /** Consumer: the arrivals of `waitSlot` (0 where -1); launch k waits for `value >= k * arrivals`. */
  waitArrivals: z.array(IntTable),
  /** Producer: column j = each tile's j-th tile-done slot to notify (+1, release), -1 when none. */
  notifySlot: z.array(IntTable),
});
export type TileTables = z.infer<typeof TileTables>;

/** The same tables as index maps (static when they fit an expression, lookup tables otherwise). */
export const TileMaps = z.object({
  tile: IndexMapJson,
  pidM: IndexMapJson,
  pidN: IndexMapJson,
  wave: IndexMapJson,
  waitSlot: z.array(IndexMapJson),
  waitArrivals: z.array(IndexMapJson),
  notifySlot: z.array(IndexMapJson),
});
export type TileMaps = z.infer<typeof TileMaps>;

/** One rank's tile schedule. */
export const RankTileSchedule = z.object({
  rank: Count,
  /** Consumer: this rank's chunk slots in arrival order. Producer: its tile-done slots in the order the plan needs them. */
  slotOrder: z.array(Count),
  /** The slots the tables name; a producer's tile-done `arrivals` is the number of tiles notifying it. */
  slots: z.array(SignalSlot),
  tables: TileTables,
  maps: TileMaps,
});
export type RankTileSchedule = z.infer<typeof RankTileSchedule>;

/** A tile schedule: a chunk plan lowered against one compute kernel's tiling (AutoOverlap §5.2). */
export const TileSchedule = z.object({
  $schema: z.literal(TILE_SCHEDULE_SCHEMA),
  /** Name of the chunk plan this schedule was lowered from. */
  plan: z.string().min(1),
  role: z.enum(["consumer", "producer"]),
  tiling: ComputeTiling,
  grid: z.object({
    numPidM: Count,
    numPidN: Count,
    numTiles: Count,
    /** Programs launched: `numSms` (capped at the tile count) when persistent, else one per tile. */
    programs: Count,
    /** Visits per program: `ceil(numTiles / programs)`. */
    rounds: Count,
  }),
  /** The variable the maps are written over: the visit step `v`, `0 <= v < numTiles`. */
  visitVariable: z.string().min(1),
  ranks: z.array(RankTileSchedule),
});
export type TileSchedule = z.infer<typeof TileSchedule>;

/** `TileSchedule` as a JSON Schema document, for non-TypeScript consumers (the Python runner). */
export function tileScheduleJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(TileSchedule, { io: "output" }) as Record<string, unknown>;
}
