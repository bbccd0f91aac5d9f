// Region identity and order for slot allocation: one slot per exact destination region,
// numbered in a canonical region order. Overlap and coverage come from the region module.
import type { Region } from "../model/schema.js";
import { intersect } from "../region/index.js";

/** A stable string identity of a region: same tensor, offsets and sizes ⇔ same key. */
export function regionKey(region: Region): string {
  return `${region.tensor}@[${region.offsets.join(",")}]+[${region.sizes.join(",")}]`;
}

/** True when the two boxes share at least one element (same tensor, overlapping on every axis). */
export function regionsIntersect(a: Region, b: Region): boolean {
  return a.tensor === b.tensor && a.offsets.length === b.offsets.length && intersect(a, b) !== undefined;
}

/**
 * Canonical order of regions: by the tensor's position in `tensorOrder`, then offsets,
 * then sizes (lexicographic). Used to number slots independently of op order.
 */
export function compareRegions(a: Region, b: Region, tensorOrder: ReadonlyMap<string, number>): number {
  const ta = tensorOrder.get(a.tensor) ?? Number.MAX_SAFE_INTEGER;
  const tb = tensorOrder.get(b.tensor) ?? Number.MAX_SAFE_INTEGER;
  if (ta !== tb) return ta - tb;
  return compareLex(a.offsets, b.offsets) || compareLex(a.sizes, b.sizes);
}

function compareLex(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}
