// Shards and chunks as regions: the balanced partition of an extent into parts (the first
// `extent % parts` parts one element larger, none empty), a tensor's shard of a rank, and a
// region's consecutive sub-regions along an axis (the pieces `split` produces).
import type { Region, TensorDecl } from "../model/schema.js";
import { PlanError } from "./errors.js";

/** A half-open interval `offset .. offset + size` along one axis. */
export interface Span {
  readonly offset: number;
  readonly size: number;
}

/** The tensor facts a shard needs: its name and shape. */
export type TensorShape = Pick<TensorDecl, "name" | "shape">;

/**
 * Splits `extent` into `parts` consecutive spans: sizes are `ceil(extent / parts)` for the
 * first `extent % parts` spans and `floor(extent / parts)` for the rest, so no span is
 * empty and sizes differ by at most one. Throws `extent-too-small` when `extent < parts`.
 */
export function partition(extent: number, parts: number): Span[] {
  checkPartition(extent, parts);
  const base = Math.floor(extent / parts);
  const larger = extent % parts;
  return Array.from({ length: parts }, (_, i) => ({
    offset: i * base + Math.min(i, larger),
    size: base + (i < larger ? 1 : 0),
  }));
}

/**
 * Span `index` of {@link partition}`(extent, parts)` without building the others
 * (undefined when `index` is outside `0 .. parts - 1`); same errors as `partition`.
 */
export function partitionSpan(extent: number, parts: number, index: number): Span | undefined {
  checkPartition(extent, parts);
  if (!Number.isSafeInteger(index) || index < 0 || index >= parts) return undefined;
  const base = Math.floor(extent / parts);
  const larger = extent % parts;
  return { offset: index * base + Math.min(index, larger), size: base + (index < larger ? 1 : 0) };
}

function checkPartition(extent: number, parts: number): void {
  if (!Number.isSafeInteger(parts) || parts < 1) {
    throw new PlanError("invalid-split", `the number of parts must be a positive integer, got ${parts}`);
  }
  if (!Number.isSafeInteger(extent) || extent < parts) {
    throw new PlanError(
      "extent-too-small",
      `an extent of ${extent} cannot be cut into ${parts} non-empty parts; use fewer parts or a larger extent`,
    );
  }
}

function checkAxis(axis: number, rankOfTensor: number, what: string): void {
  if (!Number.isSafeInteger(axis) || axis < 0 || axis >= rankOfTensor) {
    throw new PlanError("invalid-axis", `axis ${axis} is outside ${what}, which has ${rankOfTensor} dimensions`);
  }
}

/** The region covering all of `tensor`. */
export function fullRegion(tensor: TensorShape): Region {
  return { tensor: tensor.name, offsets: tensor.shape.map(() => 0), sizes: [...tensor.shape] };
}

/**
 * `tensor`'s shard `index` of `parts` along `axis` (full extent on every other axis), the
 * shard sizes following {@link partition}.
 */
export function shardRegion(tensor: TensorShape, axis: number, parts: number, index: number): Region {
  return shardSpanRegion(tensor, axis, parts, index, 1);
}

/**
 * The union of `count` consecutive shards starting at `first` (of `parts` along `axis`): a
 * node's block of shards in a hierarchical plan.
 */
export function shardSpanRegion(tensor: TensorShape, axis: number, parts: number, first: number, count: number): Region {
  checkAxis(axis, tensor.shape.length, `tensor ${tensor.name}`);
  // Two spans of the partition, not all `parts` of them: templates ask for every rank's shard.
  const begin = partitionSpan(tensor.shape[axis]!, parts, first);
  const end = count < 1 ? undefined : partitionSpan(tensor.shape[axis]!, parts, first + count - 1);
  if (!Number.isSafeInteger(first) || count < 1 || begin === undefined || end === undefined) {
    throw new PlanError("invalid-rank", `shards ${first} .. ${first + count - 1} are outside 0 .. ${parts - 1}`);
  }
  const region = fullRegion(tensor);
  region.offsets[axis] = begin.offset;
  region.sizes[axis] = end.offset + end.size - begin.offset;
  return region;
}

/**
 * `region` cut into `n` consecutive sub-regions along `axis` (sizes per {@link partition}).
 * Throws `region-too-small` when the region's extent along `axis` is below `n`.
 */
export function splitChunks(region: Region, n: number, axis: number): Region[] {
  checkAxis(axis, region.sizes.length, `region of ${region.tensor}`);
  const extent = region.sizes[axis]!;
  if (extent < n) {
    throw new PlanError(
      "region-too-small",
      `region ${formatRegionShort(region)} has extent ${extent} along axis ${axis}, smaller than the split factor ${n}; lower the split or split along another axis`,
    );
  }
  return partition(extent, n).map((span) => {
    const offsets = [...region.offsets];
    const sizes = [...region.sizes];
    offsets[axis] = region.offsets[axis]! + span.offset;
    sizes[axis] = span.size;
    return { tensor: region.tensor, offsets, sizes };
  });
}

/** True when `a` and `b` are the same box of the same tensor. */
export function sameRegion(a: Region, b: Region): boolean {
  return (
    a.tensor === b.tensor &&
    a.offsets.length === b.offsets.length &&
    a.sizes.length === b.sizes.length &&
    a.offsets.every((o, d) => o === b.offsets[d]) &&
    a.sizes.every((s, d) => s === b.sizes[d])
  );
}

/** True when `a` and `b` share at least one element (same tensor, intersecting on every axis). */
export function regionsOverlap(a: Region, b: Region): boolean {
  if (a.tensor !== b.tensor || a.offsets.length !== b.offsets.length) return false;
  return a.offsets.every((o, d) => {
    const p = b.offsets[d]!;
    return o < p + b.sizes[d]! && p < o + a.sizes[d]!;
  });
}

/** `A[0:128, 0:64]`: the tensor and its half-open interval per axis. */
export function formatRegionShort(region: Region): string {
  const axes = region.offsets.map((o, d) => `${o}:${o + (region.sizes[d] ?? 0)}`);
  return `${region.tensor}[${axes.join(", ")}]`;
}
