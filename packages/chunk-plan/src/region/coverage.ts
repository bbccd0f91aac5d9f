// Exact-coverage reports: does a set of regions cover a target box exactly once? Works on
// the atom grid cut at every region boundary, so its cost depends on the number of
// distinct pieces, not on the number of elements.
import type { Region } from "../model/schema.js";
import { atomBox, atomGrid, forEachAtom, mergeAtoms, normaliseCuts } from "./atoms.js";
import { intersect, subtract } from "./box.js";

/** What {@link coverage} found. */
export interface CoverageReport {
  /** True when every element of the target is covered exactly once. */
  exact: boolean;
  /** Parts of the target no region covers, as disjoint boxes. */
  gaps: Region[];
  /** Parts of the target covered more than once, as disjoint boxes. */
  overlaps: Region[];
  /** Parts of the given regions that lie outside the target (regions over other tensors are ignored). */
  outside: Region[];
}

/**
 * Checks that `regions` cover `target` exactly once: the chunks of a transfer must tile
 * the region they claim to move. Gaps and overlaps come back as maximal boxes.
 */
export function coverage(regions: readonly Region[], target: Region): CoverageReport {
  const dims = target.sizes.length;
  const inside: Region[] = [];
  const outside: Region[] = [];
  for (const r of regions) {
    if (r.tensor !== target.tensor) continue;
    const common = intersect(r, target);
    if (common !== undefined) inside.push(common);
    outside.push(...(common === undefined ? [r] : subtract(r, common)));
  }
  const cutSets: number[][] = [];
  for (let d = 0; d < dims; d++) {
    const lo = target.offsets[d] ?? 0;
    const points = [lo, lo + (target.sizes[d] ?? 0)];
    for (const r of inside) points.push(r.offsets[d] ?? 0, (r.offsets[d] ?? 0) + (r.sizes[d] ?? 0));
    cutSets.push(normaliseCuts(points));
  }
  const grid = atomGrid(cutSets);
  const count = new Uint32Array(grid.size);
  for (const r of inside) {
    const box = atomBox(grid, r.offsets, r.sizes);
    if (box === undefined) continue; // unreachable: every boundary is a cut
    forEachAtom(grid, box.lo, box.hi, (f) => {
      count[f] = (count[f] ?? 0) + 1;
    });
  }
  const gaps = mergeAtoms(grid, target.tensor, (f) => count[f] === 0);
  const overlaps = mergeAtoms(grid, target.tensor, (f) => (count[f] ?? 0) > 1);
  return { exact: gaps.length === 0 && overlaps.length === 0, gaps, overlaps, outside };
}
