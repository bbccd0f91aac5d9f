// Rank-map consistency: the rank a tile maps to must own that tile's data under the
// sharding in force (per-rank row ranges), or a p2p notify / pull would target the wrong peer.
import { MappingError, checkSize } from "../errors.js";
import { tileBox, tileRank, type MapEvalOptions, type RankMap, type ShapeMap } from "../maps/tile-maps.js";

/** Rows `[start, end)` owned by one rank; index in the array is the rank. */
export interface ShardRange {
  start: number;
  end: number;
}

/** Result of {@link rankMapConsistent}. */
export type RankReport =
  | { ok: true }
  | {
      ok: false;
      tile: number;
      rank: number;
      range: [number, number];
      owned: [number, number] | undefined;
      message: string;
    };

/** Options of {@link rankMapConsistent}. */
export interface RankCheckOptions extends MapEvalOptions {
  /** Tensor dimension the sharding splits; default 0 (rows). */
  dim?: number;
}

/**
 * Checks that for every tile, f_R(tile) is a rank of `sharding` whose rows contain the tile's
 * range along `dim` (from f_S of the same mapping). Empty tiles are skipped. Reports the first
 * tile that maps to a rank that does not own its data.
 */
export function rankMapConsistent(
  mapping: { shape: ShapeMap; rank: RankMap },
  sharding: readonly ShardRange[],
  options: RankCheckOptions = {},
): RankReport {
  checkSize(sharding.length, "world size (sharding.length)");
  sharding.forEach((s, r) => {
    if (!Number.isSafeInteger(s.start) || !Number.isSafeInteger(s.end) || s.start > s.end) {
      throw new MappingError("invalid-size", `sharding[${r}] = [${s.start}, ${s.end}) is not a valid row range`);
    }
  });
  const dim = options.dim ?? 0;
  if (!Number.isInteger(dim) || dim < 0 || dim >= mapping.shape.ranges.length) {
    throw new MappingError("invalid-size", `dim ${dim} is not a dimension of the shape map`);
  }
  if (mapping.rank.tileCount !== mapping.shape.tileCount) {
    throw new MappingError("invalid-size", `rank map has ${mapping.rank.tileCount} tiles but shape map has ${mapping.shape.tileCount}`);
  }
  for (let tile = 0; tile < mapping.shape.tileCount; tile++) {
    const box = tileBox(mapping.shape, tile, options);
    if (box.start.some((s, d) => s >= (box.end[d] as number))) continue;
    const start = box.start[dim] as number;
    const end = box.end[dim] as number;
    const rank = tileRank(mapping.rank, tile, options);
    const owned = sharding[rank];
    if (!owned || start < owned.start || end > owned.end) {
      const where = owned
        ? `rank ${rank} owns [${owned.start}, ${owned.end})`
        : `rank ${rank} is not in the sharding of ${sharding.length} ranks`;
      return {
        ok: false,
        tile,
        rank,
        range: [start, end],
        owned: owned ? [owned.start, owned.end] : undefined,
        message: `tile ${tile} covers [${start}, ${end}) along dimension ${dim} and maps to rank ${rank}, but ${where}`,
      };
    }
  }
  return { ok: true };
}
