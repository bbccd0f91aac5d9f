// fast-check arbitraries the property tests share.
import fc from "fast-check";

/** Powers of two from `lo` to `hi` (both powers of two), e.g. block sizes. */
export function powerOfTwo(lo: number, hi: number): fc.Arbitrary<number> {
  return fc.integer({ min: Math.log2(lo), max: Math.log2(hi) }).map((e) => 2 ** e);
}
