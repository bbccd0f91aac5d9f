// Exact-cover analysis of a shape map: the tiles of f_S must cover the tensor with no gap
// and no overlap, and stay inside it. The report names the first offending point or tile.
import { MappingError, checkSize } from "../errors.js";
import { tileBox, type Box, type MapEvalOptions, type ShapeMap } from "../maps/tile-maps.js";
import { cellGrid, cellPoint } from "./grid.js";

/** What is wrong with a tiling, located precisely. */
export type CoverageIssue =
  | { kind: "gap"; point: number[] }
  | { kind: "overlap"; point: number[]; tiles: [number, number] }
  | { kind: "out-of-bounds"; tile: number; dim: number; start: number; end: number }
  | { kind: "inverted"; tile: number; dim: number; start: number; end: number };

/** Result of {@link coversExactlyOnce} / {@link exactCover}. */
export type CoverageReport = { ok: true; tileCount: number; emptyTiles: number[] } | { ok: false; issue: CoverageIssue; message: string };

function describe(issue: CoverageIssue): string {
  switch (issue.kind) {
    case "gap":
      return `no tile covers element [${issue.point.join(", ")}]`;
    case "overlap":
      return `tiles ${issue.tiles[0]} and ${issue.tiles[1]} both cover element [${issue.point.join(", ")}]`;
    case "out-of-bounds":
      return `tile ${issue.tile} spans [${issue.start}, ${issue.end}) along dimension ${issue.dim}, outside the tensor`;
    case "inverted":
      return `tile ${issue.tile} has end ${issue.end} < start ${issue.start} along dimension ${issue.dim}`;
  }
}

const fail = (issue: CoverageIssue): CoverageReport => ({ ok: false, issue, message: describe(issue) });

/**
 * Whether `boxes` (tile i is `boxes[i]`) cover `[0, tensorShape[d])` in every dimension exactly
 * once. Empty tiles (zero extent, e.g. past a ragged end) are allowed and listed. Checks
 * bounds and orientation first, then the first gap or overlap in row-major order.
 */
export function exactCover(boxes: readonly Box[], tensorShape: readonly number[]): CoverageReport {
  if (tensorShape.length === 0) throw new MappingError("invalid-size", "tensorShape needs at least one dimension");
  tensorShape.forEach((n, d) => checkSize(n, `tensorShape[${d}]`));
  const emptyTiles: number[] = [];
  for (const [tile, b] of boxes.entries()) {
    if (b.start.length !== tensorShape.length || b.end.length !== tensorShape.length) {
      throw new MappingError("invalid-size", `tile ${tile} has ${b.start.length} dimensions but the tensor has ${tensorShape.length}`);
    }
    let empty = false;
    for (let dim = 0; dim < tensorShape.length; dim++) {
      const start = b.start[dim] as number;
      const end = b.end[dim] as number;
      if (end < start) return fail({ kind: "inverted", tile, dim, start, end });
      if (start === end) empty = true;
    }
    if (empty) {
      emptyTiles.push(tile);
      continue;
    }
    for (let dim = 0; dim < tensorShape.length; dim++) {
      const start = b.start[dim] as number;
      const end = b.end[dim] as number;
      if (start < 0 || end > (tensorShape[dim] as number)) return fail({ kind: "out-of-bounds", tile, dim, start, end });
    }
  }
  const region: Box = { start: tensorShape.map(() => 0), end: [...tensorShape] };
  const grid = cellGrid(region, boxes);
  for (let flat = 0; flat < grid.count.length; flat++) {
    const n = grid.count[flat] as number;
    if (n === 0) return fail({ kind: "gap", point: cellPoint(grid, flat) });
    if (n > 1) {
      return fail({ kind: "overlap", point: cellPoint(grid, flat), tiles: [grid.first[flat] as number, grid.second[flat] as number] });
    }
  }
  return { ok: true, tileCount: boxes.length, emptyTiles };
}

/**
 * Whether the shape map's tiles `0 .. tileCount - 1` cover a tensor of `tensorShape` exactly
 * once: no gap, no overlap, nothing outside. `options.env` fixes other variables (`rank`).
 */
export function coversExactlyOnce(
  shapeMap: ShapeMap,
  tensorShape: readonly number[],
  tileCount: number = shapeMap.tileCount,
  options: MapEvalOptions = {},
): CoverageReport {
  checkSize(tileCount, "tileCount");
  if (tileCount > shapeMap.tileCount) {
    throw new MappingError("out-of-range", `tileCount ${tileCount} exceeds the shape map's ${shapeMap.tileCount} tiles`);
  }
  const boxes = Array.from({ length: tileCount }, (_, t) => tileBox(shapeMap, t, options));
  return exactCover(boxes, tensorShape);
}
