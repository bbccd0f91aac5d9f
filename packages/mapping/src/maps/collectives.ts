// Static tile mappings of the collectives TileLink overlaps with compute (§4.1, Figure 4):
// AllGather in pull and push mode, ring ReduceScatter and AllToAll over a row-sharded
// [rows, cols] tensor. Shards are ceil(rows / world) rows; ragged last tiles and shards are
// exact: ends are clamped with `min`, counts use ceiling division.
import { checkSize } from "../errors.js";
import { ceilDivInt, mulInt } from "../expr/arith.js";
import { add, floorDiv, min, mod, mul, variable, type Expr } from "../expr/expr.js";
import { simplify } from "../expr/simplify.js";
import { staticMap } from "../tables/table.js";
import { RANK, TILE, type DimRange, type ShapeMap, type TileMapping } from "./tile-maps.js";

/** Sizes of a collective over a row-sharded `[rows, cols]` tensor. */
export interface CollectiveTiling {
  /** M: rows of the full (gathered / reduced) tensor. */
  rows: number;
  /** Columns of the tensor (K for an AllGather input, N for a ReduceScatter output). */
  cols: number;
  /** R: number of ranks (any integer >= 1, not only powers of two). */
  worldSize: number;
  /** Tm: rows per communication tile. */
  tileRows: number;
  /** Columns per communication tile; defaults to `cols` (whole rows). */
  tileCols?: number;
  /** C: signal slots per shard (TileLink's "C channels per rank"); default 1. */
  channelsPerRank?: number;
}

const cdiv = ceilDivInt;

/** Resolved sizes and the shared sub-expressions of a row-sharded tiling. */
function layout(t: CollectiveTiling, steps: number) {
  const M = checkSize(t.rows, "rows");
  const K = checkSize(t.cols, "cols");
  const R = checkSize(t.worldSize, "worldSize");
  const Tm = checkSize(t.tileRows, "tileRows");
  const Tk = checkSize(t.tileCols ?? t.cols, "tileCols");
  const C = checkSize(t.channelsPerRank ?? 1, "channelsPerRank");
  const perRank = cdiv(M, R); // M_per_rank = ceil(M / R)
  const tilesPerShard = cdiv(perRank, Tm);
  const tilesK = cdiv(K, Tk);
  const tilesPerChannel = cdiv(tilesPerShard, C);
  const tileCount = mulInt(mulInt(steps, tilesPerShard), tilesK);
  const tile = variable(TILE, { min: 0, max: tileCount - 1 });
  const rank = variable(RANK, { min: 0, max: R - 1 });
  const rowTile = floorDiv(tile, tilesK);
  const colTile = mod(tile, tilesK);
  const local = mod(rowTile, tilesPerShard); // tile index inside its shard
  const step = floorDiv(rowTile, tilesPerShard); // which shard / stage / peer step
  /** Rows of shard `s` covered by the local tile, clamped to the shard and to M. */
  const rowRange = (s: Expr): DimRange => ({
    start: staticMap(simplify(min(add(mul(s, perRank), mul(local, Tm)), M))),
    end: staticMap(simplify(min(add(mul(s, perRank), min(add(mul(local, Tm), Tm), perRank)), M))),
  });
  const colRange: DimRange = {
    start: staticMap(simplify(mul(colTile, Tk))),
    end: staticMap(simplify(min(add(mul(colTile, Tk), Tk), K))),
  };
  const slot = (s: Expr): Expr => simplify(add(mul(s, C), floorDiv(local, tilesPerChannel)));
  return { M, K, R, C, tileCount, rank, step, rowRange, colRange, slot };
}

function mapping(l: ReturnType<typeof layout>, shard: Expr, rank: Expr, channel: Expr): TileMapping {
  const shape: ShapeMap = { tile: TILE, tileCount: l.tileCount, ranges: [l.rowRange(shard), l.colRange] };
  return {
    worldSize: l.R,
    shape,
    rank: { tile: TILE, tileCount: l.tileCount, rank: staticMap(simplify(rank)) },
    channel: { tile: TILE, tileCount: l.tileCount, channel: staticMap(channel), channelCount: mulInt(l.R, l.C) },
  };
}

/** Tile order of a pull AllGather: shards in rank order, or starting at the own shard. */
export type GatherOrder = "linear" | "swizzled";

/**
 * AllGather, pull mode (TileLink §4.1): tile `tile` of the gathered tensor is read from
 * `src_rank = tile // tiles_per_rank` (or `(rank + tile // tiles_per_rank) % R` when
 * `order` is `"swizzled"`, so each rank starts with its own shard), rows
 * `[src*M_per_rank + l*Tm, min(src*M_per_rank + min((l+1)*Tm, M_per_rank), M))`, and signals
 * the local slot `src*C + l // tiles_per_channel`. Maps use variables `tile` and `rank`.
 */
export function allGatherPull(t: CollectiveTiling, order: GatherOrder = "linear"): TileMapping {
  const l = layout(t, checkSize(t.worldSize, "worldSize"));
  const src = order === "swizzled" ? mod(add(l.rank, l.step), l.R) : l.step;
  return mapping(l, src, src, l.slot(src));
}

/**
 * AllGather, push mode (TileLink §3.2.2): rank `rank` writes its own shard to every rank,
 * step `s = tile // tiles_per_rank` going to `dst = (rank + s) % R` (itself first). The shape
 * map gives the rows of the own shard, f_R the destination, f_C the destination's slot for
 * this source segment `rank*C + l // tiles_per_channel`.
 */
export function allGatherPush(t: CollectiveTiling): TileMapping {
  const l = layout(t, checkSize(t.worldSize, "worldSize"));
  return mapping(l, l.rank, mod(add(l.rank, l.step), l.R), l.slot(l.rank));
}

/**
 * Ring ReduceScatter (TileLink Figure 4): at stage `s = tile // tiles_per_rank` rank `rank`
 * reduces segment `seg = (rank + s + 1) % R` and pushes the partial sum to
 * `(rank - 1 + R) % R`; at the last stage `seg == rank` and the result stays local, so f_R is
 * `rank`. f_C is the peer slot of the segment, `seg*C + l // tiles_per_channel`.
 */
export function reduceScatterRing(t: CollectiveTiling): TileMapping {
  const l = layout(t, checkSize(t.worldSize, "worldSize"));
  const seg = mod(add(l.rank, l.step, 1), l.R);
  // floorDiv(s, R - 1) is 1 exactly at the last stage, turning "previous rank" into "self".
  const to = l.R === 1 ? l.rank : mod(add(l.rank, l.R - 1, floorDiv(l.step, l.R - 1)), l.R);
  return mapping(l, seg, to, l.slot(seg));
}

/**
 * AllToAll: the send buffer's rows are split into R chunks of ceil(rows / R); at step
 * `s = tile // tiles_per_chunk` rank `rank` sends chunk `dst = (rank + s) % R` to rank `dst`,
 * signalling the destination's slot for this source `rank*C + l // tiles_per_channel`.
 */
export function allToAll(t: CollectiveTiling): TileMapping {
  const l = layout(t, checkSize(t.worldSize, "worldSize"));
  const dst = mod(add(l.rank, l.step), l.R);
  return mapping(l, dst, dst, l.slot(l.rank));
}

/** Sizes of a plain 2-D tiling (a GEMM's output or input tiles). */
export interface MatrixTiling {
  rows: number;
  cols: number;
  tileRows: number;
  tileCols: number;
}

/**
 * Shape map of a row-major grid of `tileRows × tileCols` tiles over `[rows, cols]`
 * (`tile = tile_m * tiles_n + tile_n`), ragged edges clamped. The compute side of a
 * decoupled producer/consumer pair.
 */
export function matrixTiles(t: MatrixTiling): ShapeMap {
  const M = checkSize(t.rows, "rows");
  const N = checkSize(t.cols, "cols");
  const Tm = checkSize(t.tileRows, "tileRows");
  const Tn = checkSize(t.tileCols, "tileCols");
  const tilesN = cdiv(N, Tn);
  const tileCount = mulInt(cdiv(M, Tm), tilesN);
  const tile = variable(TILE, { min: 0, max: tileCount - 1 });
  const tm = floorDiv(tile, tilesN);
  const tn = mod(tile, tilesN);
  const range = (i: Expr, size: number, total: number): DimRange => ({
    start: staticMap(simplify(mul(i, size))),
    end: staticMap(simplify(min(add(mul(i, size), size), total))),
  });
  return { tile: TILE, tileCount, ranges: [range(tm, Tm, M), range(tn, Tn, N)] };
}

/** Rows each rank owns under TileLink's sharding: `[r*ceil(M/R), min((r+1)*ceil(M/R), M))`. */
export function rowSharding(rows: number, worldSize: number): Array<{ start: number; end: number }> {
  const M = checkSize(rows, "rows");
  const R = checkSize(worldSize, "worldSize");
  const per = cdiv(M, R);
  return Array.from({ length: R }, (_, r) => ({ start: Math.min(r * per, M), end: Math.min((r + 1) * per, M) }));
}
