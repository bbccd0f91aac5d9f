// TileLink §4.1's three tile-centric mappings as data: the shape map f_S (tile → the
// half-open range it touches along each tensor dimension), the rank map f_R (tile → rank)
// and the channel map f_C (tile → signal slot). Each entry is a static or dynamic IndexMap.
import { z } from "zod";
import { MappingError, checkSize } from "../errors.js";
import type { Env } from "../expr/evaluate.js";
import { checkIdentifier } from "../expr/identifier.js";
import { evaluateMap, IndexMapSchema, type IndexMap, type TableValues } from "../tables/table.js";

/** Name of the tile-id variable in the maps this package builds. */
export const TILE = "tile";
/** Name of the variable holding the executing rank in the maps this package builds. */
export const RANK = "rank";

/** `[start, end)` of a tile along one tensor dimension. */
export interface DimRange {
  start: IndexMap;
  end: IndexMap;
}

/** f_S: for tile `tile` in `[0, tileCount)`, the range along each tensor dimension. */
export interface ShapeMap {
  tile: string;
  tileCount: number;
  ranges: DimRange[];
}

/** f_R: the rank a tile maps to (the rank that owns, sends or receives it). */
export interface RankMap {
  tile: string;
  tileCount: number;
  rank: IndexMap;
}

/** f_C: the signal slot (channel) of a tile, in `[0, channelCount)`. */
export interface ChannelMap {
  tile: string;
  tileCount: number;
  channel: IndexMap;
  channelCount: number;
}

/** The three mappings of one tiling, with the world size they were built for. */
export interface TileMapping {
  worldSize: number;
  shape: ShapeMap;
  rank: RankMap;
  channel: ChannelMap;
}

const tileFields = { tile: z.string(), tileCount: z.int().min(1) };
/** zod schema of {@link ShapeMap}. */
export const ShapeMapSchema = z.object({
  ...tileFields,
  ranges: z.array(z.object({ start: IndexMapSchema, end: IndexMapSchema })).min(1),
});
/** zod schema of {@link RankMap}. */
export const RankMapSchema = z.object({ ...tileFields, rank: IndexMapSchema });
/** zod schema of {@link ChannelMap}. */
export const ChannelMapSchema = z.object({ ...tileFields, channel: IndexMapSchema, channelCount: z.int().min(1) });
/** zod schema of {@link TileMapping}. */
export const TileMappingSchema = z.object({
  worldSize: z.int().min(1),
  shape: ShapeMapSchema,
  rank: RankMapSchema,
  channel: ChannelMapSchema,
});

/** Options shared by the functions that evaluate maps: other variables and table values. */
export interface MapEvalOptions {
  /** Values of variables other than the tile id (e.g. `rank`). */
  env?: Env;
  /** Run-time values of dynamic tables, by table name. */
  tables?: TableValues;
}

function tileEnv(map: { tile: string; tileCount: number }, tile: number, env: Env | undefined): Env {
  checkIdentifier(map.tile, "tile variable");
  checkSize(map.tileCount, "tileCount");
  if (!Number.isSafeInteger(tile) || tile < 0 || tile >= map.tileCount) {
    throw new MappingError("out-of-range", `tile ${tile} is outside [0, ${map.tileCount})`);
  }
  return { ...env, [map.tile]: tile };
}

/** A tile's box: `start[d] <= x[d] < end[d]` for every dimension d. */
export interface Box {
  start: number[];
  end: number[];
}

/** f_S(tile): the half-open box the tile touches. */
export function tileBox(shape: ShapeMap, tile: number, options: MapEvalOptions = {}): Box {
  const env = tileEnv(shape, tile, options.env);
  return {
    start: shape.ranges.map((r) => evaluateMap(r.start, env, options.tables)),
    end: shape.ranges.map((r) => evaluateMap(r.end, env, options.tables)),
  };
}

/** f_R(tile). */
export function tileRank(map: RankMap, tile: number, options: MapEvalOptions = {}): number {
  return evaluateMap(map.rank, tileEnv(map, tile, options.env), options.tables);
}

/** f_C(tile); throws `out-of-range` when the slot leaves `[0, channelCount)`. */
export function tileChannel(map: ChannelMap, tile: number, options: MapEvalOptions = {}): number {
  const c = evaluateMap(map.channel, tileEnv(map, tile, options.env), options.tables);
  if (c < 0 || c >= map.channelCount) {
    throw new MappingError("out-of-range", `tile ${tile} maps to channel ${c}, outside [0, ${map.channelCount})`);
  }
  return c;
}
