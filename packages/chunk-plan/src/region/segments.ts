// Byte segments of a region in its tensor's memory layout: the contiguous runs a copy
// engine (AutoOverlap Table 2) can move in one transfer each. Axes the box spans whole
// are folded into the run, so a slab of whole rows is one segment.
import { DTYPE_BYTES, type Region, type TensorDecl } from "../model/schema.js";
import { formatRegion, inBounds } from "./box.js";
import { RegionError } from "./errors.js";

/** A contiguous byte range of a tensor's buffer. */
export interface ByteSegment {
  /** Start, in bytes from the buffer's base. */
  offset: number;
  /** Length in bytes. */
  length: number;
}

/** Row-major strides (in elements) of a shape. */
export function rowMajorStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length).fill(1);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = acc;
    acc *= shape[d] ?? 1;
  }
  return strides;
}

/**
 * Strides of a tensor (declared or row-major), checked to map distinct elements to
 * distinct addresses: sorted by stride, each axis must step over the whole previous one.
 */
export function tensorStrides(decl: TensorDecl): number[] {
  const strides = decl.strides ?? rowMajorStrides(decl.shape);
  if (strides.length !== decl.shape.length) {
    throw new RegionError(
      "bad-strides",
      `tensor ${decl.name} has ${decl.shape.length} axes but ${strides.length} strides; give one stride per axis`,
    );
  }
  const order = strides.map((_, d) => d).filter((d) => (decl.shape[d] ?? 1) > 1);
  order.sort((a, b) => (strides[a] ?? 0) - (strides[b] ?? 0));
  let span = 1;
  for (const d of order) {
    const s = strides[d] ?? 0;
    if (s < span) {
      throw new RegionError(
        "bad-strides",
        `tensor ${decl.name}'s strides [${strides.join(", ")}] make elements alias: axis ${d} steps ${s} elements, inside the ${span} elements of the faster axes`,
      );
    }
    span = s * (decl.shape[d] ?? 1);
  }
  return strides;
}

/**
 * The contiguous byte segments holding exactly the elements of `region`, sorted by
 * offset and maximal (no segment ends where the next begins). Axes are taken fastest
 * first; an axis joins the contiguous run while its stride equals the run's length,
 * which holds exactly when the faster axes are spanned whole.
 */
export function toByteSegments(region: Region, decl: TensorDecl): ByteSegment[] {
  if (!inBounds(region, decl)) {
    throw new RegionError(
      region.tensor === decl.name ? "out-of-bounds" : "tensor-mismatch",
      `region ${formatRegion(region)} is not a box inside tensor ${decl.name} of shape [${decl.shape.join(", ")}]`,
    );
  }
  const strides = tensorStrides(decl);
  const elem = DTYPE_BYTES[decl.dtype];
  const dims = decl.shape.length;
  let base = 0;
  for (let d = 0; d < dims; d++) base += (region.offsets[d] ?? 0) * (strides[d] ?? 0);
  const order = Array.from({ length: dims }, (_, d) => d)
    .filter((d) => (region.sizes[d] ?? 1) > 1)
    .sort((a, b) => (strides[a] ?? 0) - (strides[b] ?? 0));
  let run = 1;
  let k = 0;
  while (k < order.length && (strides[order[k] ?? 0] ?? 0) === run) {
    run *= region.sizes[order[k] ?? 0] ?? 1;
    k++;
  }
  const outer = order.slice(k);
  const starts: number[] = [];
  const walk = (level: number, at: number): void => {
    if (level < 0) {
      starts.push(at);
      return;
    }
    const d = outer[level] ?? 0;
    const s = strides[d] ?? 0;
    for (let i = 0; i < (region.sizes[d] ?? 1); i++) walk(level - 1, at + i * s);
  };
  walk(outer.length - 1, base);
  starts.sort((a, b) => a - b);
  const segments: ByteSegment[] = [];
  for (const start of starts) {
    const last = segments[segments.length - 1];
    if (last !== undefined && last.offset + last.length === start * elem) last.length += run * elem;
    else segments.push({ offset: start * elem, length: run * elem });
  }
  return segments;
}
