// Atom grids: a box cut on every axis at a given set of points. Boxes whose boundaries are
// cut points map to ranges of atoms, so coverage and symbolic values are tracked per atom
// (one per distinct piece of the partition), never per element.
import type { Region } from "../model/schema.js";

/** A box partitioned into atoms by sorted cut points per axis (first and last cut are its bounds). */
export interface AtomGrid {
  /** Per axis, strictly increasing cut points; atom `i` on axis `d` is `[cuts[d][i], cuts[d][i+1])`. */
  readonly cuts: readonly (readonly number[])[];
  /** Atoms per axis. */
  readonly counts: readonly number[];
  /** Row-major strides over atom indices. */
  readonly strides: readonly number[];
  /** Total number of atoms. */
  readonly size: number;
}

/** Sorts and deduplicates cut points. */
export function normaliseCuts(points: Iterable<number>): number[] {
  const sorted = Array.from(new Set(points)).sort((x, y) => x - y);
  return sorted;
}

/** Builds a grid from per-axis cut points (each already sorted, deduplicated, at least two). */
export function atomGrid(cuts: readonly (readonly number[])[]): AtomGrid {
  const counts = cuts.map((c) => Math.max(0, c.length - 1));
  const strides: number[] = new Array<number>(counts.length).fill(1);
  let size = 1;
  for (let d = counts.length - 1; d >= 0; d--) {
    strides[d] = size;
    size *= counts[d] ?? 0;
  }
  return { cuts, counts, strides, size };
}

/** Index of `point` among `cuts`, or -1 when it is not a cut point. */
export function cutIndex(cuts: readonly number[], point: number): number {
  let lo = 0;
  let hi = cuts.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = cuts[mid] ?? 0;
    if (v === point) return mid;
    if (v < point) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/** Index of the first cut point `>= point` (cuts.length when none). */
export function lowerBound(cuts: readonly number[], point: number): number {
  let lo = 0;
  let hi = cuts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((cuts[mid] ?? 0) < point) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Atom index ranges `[lo[d], hi[d])` of a box whose boundaries are cut points, or undefined. */
export function atomBox(grid: AtomGrid, offsets: readonly number[], sizes: readonly number[]): { lo: number[]; hi: number[] } | undefined {
  const lo: number[] = [];
  const hi: number[] = [];
  for (let d = 0; d < grid.counts.length; d++) {
    const cuts = grid.cuts[d] ?? [];
    const a = cutIndex(cuts, offsets[d] ?? 0);
    const b = cutIndex(cuts, (offsets[d] ?? 0) + (sizes[d] ?? 0));
    if (a < 0 || b < 0) return undefined;
    lo.push(a);
    hi.push(b);
  }
  return { lo, hi };
}

/** Calls `fn` with the flat index of every atom in `[lo, hi)`, in row-major order. */
export function forEachAtom(grid: AtomGrid, lo: readonly number[], hi: readonly number[], fn: (flat: number) => void): void {
  const dims = grid.counts.length;
  for (let d = 0; d < dims; d++) if ((hi[d] ?? 0) <= (lo[d] ?? 0)) return;
  const last = dims - 1;
  const idx = lo.slice();
  const lastLo = lo[last] ?? 0;
  const lastHi = hi[last] ?? 0;
  for (;;) {
    let base = 0;
    for (let d = 0; d < last; d++) base += (idx[d] ?? 0) * (grid.strides[d] ?? 0);
    for (let i = lastLo; i < lastHi; i++) fn(base + i);
    let d = last - 1;
    while (d >= 0) {
      const next = (idx[d] ?? 0) + 1;
      if (next < (hi[d] ?? 0)) {
        idx[d] = next;
        break;
      }
      idx[d] = lo[d] ?? 0;
      d--;
    }
    if (d < 0) return;
  }
}

/** The element box of atoms `[lo, hi)`. */
export function atomBoxRegion(grid: AtomGrid, tensor: string, lo: readonly number[], hi: readonly number[]): Region {
  const offsets: number[] = [];
  const sizes: number[] = [];
  for (let d = 0; d < grid.counts.length; d++) {
    const cuts = grid.cuts[d] ?? [];
    const a = cuts[lo[d] ?? 0] ?? 0;
    offsets.push(a);
    sizes.push((cuts[hi[d] ?? 0] ?? 0) - a);
  }
  return { tensor, offsets, sizes };
}

/**
 * Merges the atoms selected by `selected` into disjoint boxes, greedily maximal: each box
 * grows along the innermost axis first, then outwards while a whole next slab is selected.
 * Stops after `limit` boxes (the report of a broken plan needs the first few, not all).
 */
export function mergeAtoms(
  grid: AtomGrid,
  tensor: string,
  selected: (flat: number) => boolean,
  limit = Number.POSITIVE_INFINITY,
): Region[] {
  const dims = grid.counts.length;
  const taken = new Uint8Array(grid.size);
  const free = (flat: number): boolean => taken[flat] === 0 && selected(flat);
  const boxes: Region[] = [];
  for (let flat = 0; flat < grid.size && boxes.length < limit; flat++) {
    if (!free(flat)) continue;
    const lo: number[] = [];
    let rest = flat;
    for (let d = 0; d < dims; d++) {
      const s = grid.strides[d] ?? 1;
      lo.push(Math.floor(rest / s));
      rest %= s;
    }
    const hi = lo.map((x) => x + 1);
    for (let d = dims - 1; d >= 0; d--) {
      for (;;) {
        const next = hi[d] ?? 0;
        if (next >= (grid.counts[d] ?? 0)) break;
        const slabLo = lo.slice();
        const slabHi = hi.slice();
        slabLo[d] = next;
        slabHi[d] = next + 1;
        let all = true;
        forEachAtom(grid, slabLo, slabHi, (f) => {
          if (all && !free(f)) all = false;
        });
        if (!all) break;
        hi[d] = next + 1;
      }
    }
    forEachAtom(grid, lo, hi, (f) => {
      taken[f] = 1;
    });
    boxes.push(atomBoxRegion(grid, tensor, lo, hi));
  }
  return boxes;
}
