// Box algebra over regions (AutoOverlap §5.1: a chunk is "a logical block of data"):
// volume, bounds, intersection, difference and ragged splitting of N-d boxes, all exact
// and independent of element layout.
import { DTYPE_BYTES, type Region, type TensorDecl } from "../model/schema.js";
import { RegionError } from "./errors.js";

/** Human-readable form used in error messages: `x[0:4, 8:16]`. */
export function formatRegion(region: Region): string {
  const ranges = region.offsets.map((o, d) => `${o}:${o + (region.sizes[d] ?? 0)}`);
  return `${region.tensor}[${ranges.join(", ")}]`;
}

function checkDims(region: Region): number {
  if (region.offsets.length !== region.sizes.length) {
    throw new RegionError(
      "rank-mismatch",
      `region ${region.tensor} has ${region.offsets.length} offsets but ${region.sizes.length} sizes; give one of each per axis`,
    );
  }
  return region.sizes.length;
}

function checkSameTensor(a: Region, b: Region): void {
  const da = checkDims(a);
  const db = checkDims(b);
  if (a.tensor === b.tensor && da !== db) {
    throw new RegionError(
      "rank-mismatch",
      `regions ${formatRegion(a)} and ${formatRegion(b)} name the same tensor with ${da} and ${db} axes`,
    );
  }
}

function checkDecl(region: Region, decl: TensorDecl): void {
  if (region.tensor !== decl.name) {
    throw new RegionError("tensor-mismatch", `region ${formatRegion(region)} is over tensor ${region.tensor}, not ${decl.name}`);
  }
  if (checkDims(region) !== decl.shape.length) {
    throw new RegionError(
      "rank-mismatch",
      `region ${formatRegion(region)} has ${region.sizes.length} axes but tensor ${decl.name} has ${decl.shape.length}`,
    );
  }
}

/** Number of elements in the box (product of its sizes). */
export function regionVolume(region: Region): number {
  checkDims(region);
  let v = 1;
  for (const s of region.sizes) v *= s;
  return v;
}

/** Bytes the box occupies in `decl`'s dtype; throws {@link RegionError} if it is not over `decl`. */
export function regionBytes(region: Region, decl: TensorDecl): number {
  checkDecl(region, decl);
  return regionVolume(region) * DTYPE_BYTES[decl.dtype];
}

/** True when the box is over `decl`, has its number of axes, and lies inside its shape. */
export function inBounds(region: Region, decl: TensorDecl): boolean {
  if (region.tensor !== decl.name) return false;
  if (region.offsets.length !== decl.shape.length || region.sizes.length !== decl.shape.length) return false;
  return decl.shape.every((extent, d) => {
    const o = region.offsets[d] ?? -1;
    const s = region.sizes[d] ?? 0;
    return Number.isInteger(o) && Number.isInteger(s) && o >= 0 && s > 0 && o + s <= extent;
  });
}

/** True when both boxes have the same sizes on every axis (tensors and offsets may differ). */
export function sameShape(a: Region, b: Region): boolean {
  return a.sizes.length === b.sizes.length && a.sizes.every((s, d) => s === b.sizes[d]);
}

/**
 * The common elements of two boxes, or `undefined` when they share none (boxes over
 * different tensors never intersect). Throws when both name one tensor with different axes.
 */
export function intersect(a: Region, b: Region): Region | undefined {
  checkSameTensor(a, b);
  if (a.tensor !== b.tensor) return undefined;
  const offsets: number[] = [];
  const sizes: number[] = [];
  for (let d = 0; d < a.sizes.length; d++) {
    const lo = Math.max(a.offsets[d] ?? 0, b.offsets[d] ?? 0);
    const hi = Math.min((a.offsets[d] ?? 0) + (a.sizes[d] ?? 0), (b.offsets[d] ?? 0) + (b.sizes[d] ?? 0));
    if (hi <= lo) return undefined;
    offsets.push(lo);
    sizes.push(hi - lo);
  }
  return { tensor: a.tensor, offsets, sizes };
}

/**
 * `a ∖ b` as pairwise-disjoint boxes (at most 2 per axis). Axis by axis, the part of `a`
 * below and above `b` is cut off, and the remainder narrowed to `b` on that axis, so the
 * pieces and `a ∩ b` partition `a` exactly.
 */
export function subtract(a: Region, b: Region): Region[] {
  const common = intersect(a, b);
  if (common === undefined) return [{ tensor: a.tensor, offsets: [...a.offsets], sizes: [...a.sizes] }];
  const pieces: Region[] = [];
  const offsets = [...a.offsets];
  const sizes = [...a.sizes];
  for (let d = 0; d < sizes.length; d++) {
    const lo = offsets[d] ?? 0;
    const hi = lo + (sizes[d] ?? 0);
    const clo = common.offsets[d] ?? 0;
    const chi = clo + (common.sizes[d] ?? 0);
    if (clo > lo) {
      const o = [...offsets];
      const s = [...sizes];
      s[d] = clo - lo;
      pieces.push({ tensor: a.tensor, offsets: o, sizes: s });
    }
    if (chi < hi) {
      const o = [...offsets];
      const s = [...sizes];
      o[d] = chi;
      s[d] = hi - chi;
      pieces.push({ tensor: a.tensor, offsets: o, sizes: s });
    }
    offsets[d] = clo;
    sizes[d] = chi - clo;
  }
  return pieces;
}

/**
 * Splits a box into `n` consecutive pieces along `axis` (AutoOverlap's `split(n)` knob).
 * Ragged but exact: sizes differ by at most one, larger pieces first, and the pieces
 * cover the box exactly once. Throws when `n` is not a positive integer no larger than
 * the box's extent on `axis` (an empty chunk is never produced).
 */
export function splitRegion(region: Region, n: number, axis: number): Region[] {
  const dims = checkDims(region);
  if (!Number.isInteger(axis) || axis < 0 || axis >= dims) {
    throw new RegionError("bad-axis", `cannot split ${formatRegion(region)} along axis ${axis}: it has axes 0..${dims - 1}`);
  }
  const extent = region.sizes[axis] ?? 0;
  if (!Number.isInteger(n) || n < 1 || n > extent) {
    throw new RegionError(
      "bad-split",
      `cannot split ${formatRegion(region)} into ${n} pieces along axis ${axis}: use an integer from 1 to ${extent}`,
    );
  }
  const base = Math.floor(extent / n);
  const extra = extent % n;
  const pieces: Region[] = [];
  let at = region.offsets[axis] ?? 0;
  for (let i = 0; i < n; i++) {
    const size = base + (i < extra ? 1 : 0);
    const offsets = [...region.offsets];
    const sizes = [...region.sizes];
    offsets[axis] = at;
    sizes[axis] = size;
    pieces.push({ tensor: region.tensor, offsets, sizes });
    at += size;
  }
  return pieces;
}
