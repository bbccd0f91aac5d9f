// Regions to copy-engine segments: a region's contiguous runs (element offsets of its
// tensor's buffer), and a source and destination region paired run by run, so each pair
// is one `copy` host op of equal length.
import { DTYPE_BYTES, type Region, type TensorDecl, toByteSegments } from "@ovl/chunk-plan";
import { EmitError } from "../core/writer/index.js";

/** A contiguous run in elements. */
export interface ElementRun {
  readonly offset: number;
  readonly length: number;
}

/** The contiguous element runs of `region` in `decl`'s layout, sorted by offset. */
export function elementRuns(region: Region, decl: TensorDecl): ElementRun[] {
  const elem = DTYPE_BYTES[decl.dtype];
  return toByteSegments(region, decl).map((s) => ({ offset: s.offset / elem, length: s.length / elem }));
}

/**
 * Pairs the runs of `src` and `dst` in element order (both regions have the same shape,
 * so the k-th element of one goes to the k-th of the other), cutting runs where either
 * side's run ends.
 * @throws {EmitError} `bad-plan` when the regions hold different numbers of elements.
 */
export function pairRuns(src: readonly ElementRun[], dst: readonly ElementRun[]): { src: ElementRun; dst: ElementRun }[] {
  const total = (runs: readonly ElementRun[]) => runs.reduce((a, r) => a + r.length, 0);
  if (total(src) !== total(dst)) {
    throw new EmitError("bad-plan", `a transfer's source holds ${total(src)} elements but its destination ${total(dst)}`);
  }
  const out: { src: ElementRun; dst: ElementRun }[] = [];
  let i = 0;
  let j = 0;
  let si = 0;
  let dj = 0;
  while (i < src.length && j < dst.length) {
    const s = src[i]!;
    const d = dst[j]!;
    const len = Math.min(s.length - si, d.length - dj);
    out.push({ src: { offset: s.offset + si, length: len }, dst: { offset: d.offset + dj, length: len } });
    si += len;
    dj += len;
    if (si === s.length) {
      i++;
      si = 0;
    }
    if (dj === d.length) {
      j++;
      dj = 0;
    }
  }
  return out;
}
