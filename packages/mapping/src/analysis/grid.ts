// Coordinate compression of boxes: the breakpoints of all box edges split a region into
// cells that every box covers wholly or not at all, so coverage questions (gaps, overlaps)
// are answered by counting per cell instead of per element.
import type { Box } from "../maps/tile-maps.js";

/** Counts, per compressed cell of `region`, how many of `boxes` cover it. */
export interface CellGrid {
  /** Sorted breakpoints per dimension (region start and end included). */
  cuts: number[][];
  /** Cover count per cell, row-major over the cells. */
  count: Int32Array;
  /** First and second box (by index into `boxes`) covering each cell, -1 when none. */
  first: Int32Array;
  second: Int32Array;
}

function lowerBound(xs: readonly number[], v: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((xs[mid] as number) < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Boxes are clipped to `region`; empty boxes (or empty after clipping) cover nothing. */
export function cellGrid(region: Box, boxes: readonly Box[]): CellGrid {
  const dims = region.start.length;
  const cuts: number[][] = [];
  for (let d = 0; d < dims; d++) {
    const lo = region.start[d] as number;
    const hi = region.end[d] as number;
    const set = new Set<number>([lo, hi]);
    for (const b of boxes) {
      for (const v of [b.start[d] as number, b.end[d] as number]) if (v > lo && v < hi) set.add(v);
    }
    cuts.push([...set].sort((a, b) => a - b));
  }
  const sizes = cuts.map((c) => Math.max(c.length - 1, 0));
  const cells = sizes.reduce((a, b) => a * b, 1);
  const count = new Int32Array(cells);
  const first = new Int32Array(cells).fill(-1);
  const second = new Int32Array(cells).fill(-1);
  boxes.forEach((b, index) => {
    const lo: number[] = [];
    const hi: number[] = [];
    for (let d = 0; d < dims; d++) {
      const c = cuts[d] as number[];
      const s = Math.max(b.start[d] as number, region.start[d] as number);
      const e = Math.min(b.end[d] as number, region.end[d] as number);
      if (s >= e) return;
      lo.push(lowerBound(c, s));
      hi.push(lowerBound(c, e));
    }
    // Odometer over the cell index ranges of this box.
    const idx = [...lo];
    for (;;) {
      let flat = 0;
      for (let d = 0; d < dims; d++) flat = flat * (sizes[d] as number) + (idx[d] as number);
      count[flat] = (count[flat] as number) + 1;
      if (first[flat] === -1) first[flat] = index;
      else if (second[flat] === -1) second[flat] = index;
      let d = dims - 1;
      while (d >= 0) {
        idx[d] = (idx[d] as number) + 1;
        if ((idx[d] as number) < (hi[d] as number)) break;
        idx[d] = lo[d] as number;
        d--;
      }
      if (d < 0) break;
    }
  });
  return { cuts, count, first, second };
}

/** The lowest corner of cell `flat` (row-major), i.e. a concrete point inside it. */
export function cellPoint(grid: CellGrid, flat: number): number[] {
  const point: number[] = [];
  for (let d = grid.cuts.length - 1; d >= 0; d--) {
    const c = grid.cuts[d] as number[];
    const n = Math.max(c.length - 1, 1);
    point.unshift(c[flat % n] as number);
    flat = Math.floor(flat / n);
  }
  return point;
}
