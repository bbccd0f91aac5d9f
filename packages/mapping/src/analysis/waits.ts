// Decoupled producer/consumer tile sizes (TileLink §3.1): a consumer tile waits for exactly
// the producer tiles whose data it reads. This derives that set from the two shape maps and
// checks the two sides agree: each consumer tile's data is covered by what it waits for.
import { MappingError } from "../errors.js";
import { tileBox, type Box, type MapEvalOptions, type ShapeMap } from "../maps/tile-maps.js";
import { cellGrid, cellPoint } from "./grid.js";

/** Result of {@link consumerWaits}. */
export interface WaitReport {
  /** `waits[c]`: producer tiles consumer tile c waits for, ascending. */
  waits: number[][];
  /** True when every consumer tile's data lies inside the producer tiles it waits for. */
  ok: boolean;
  /** Consumer tiles with data no producer tile writes, with one such element each. */
  uncovered: Array<{ consumerTile: number; point: number[] }>;
}

/** Options of {@link consumerWaits}: variables and tables for each side. */
export interface WaitOptions {
  producer?: MapEvalOptions;
  consumer?: MapEvalOptions;
}

const isEmpty = (b: Box): boolean => b.start.some((s, d) => s >= (b.end[d] as number));

function intersects(a: Box, b: Box): boolean {
  return a.start.every((s, d) => s < (b.end[d] as number) && (b.start[d] as number) < (a.end[d] as number));
}

/**
 * For each consumer tile, the producer tiles whose boxes intersect its box (the exact wait
 * set of `consumer_tile_wait`), and whether the producer tiles cover the consumer's data.
 */
export function consumerWaits(producerMap: ShapeMap, consumerMap: ShapeMap, options: WaitOptions = {}): WaitReport {
  if (producerMap.ranges.length !== consumerMap.ranges.length) {
    throw new MappingError(
      "invalid-size",
      `producer tiles have ${producerMap.ranges.length} dimensions, consumer tiles ${consumerMap.ranges.length}; both must index the same tensor`,
    );
  }
  const producers = Array.from({ length: producerMap.tileCount }, (_, t) => tileBox(producerMap, t, options.producer));
  const live = producers.map((b, i) => ({ b, i })).filter(({ b }) => !isEmpty(b));
  const waits: number[][] = [];
  const uncovered: WaitReport["uncovered"] = [];
  for (let c = 0; c < consumerMap.tileCount; c++) {
    const box = tileBox(consumerMap, c, options.consumer);
    if (isEmpty(box)) {
      waits.push([]);
      continue;
    }
    const hits = live.filter(({ b }) => intersects(b, box));
    waits.push(hits.map(({ i }) => i));
    const grid = cellGrid(
      box,
      hits.map(({ b }) => b),
    );
    const hole = grid.count.indexOf(0);
    if (hole >= 0) uncovered.push({ consumerTile: c, point: cellPoint(grid, hole) });
  }
  return { waits, ok: uncovered.length === 0, uncovered };
}
