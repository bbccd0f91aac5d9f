// Barrel of the region module: N-d boxes over tensors, their algebra, coverage and layout.
export { RegionError, type RegionErrorCode } from "./errors.js";
export {
  formatRegion,
  regionVolume,
  regionBytes,
  inBounds,
  sameShape,
  intersect,
  subtract,
  splitRegion,
} from "./box.js";
export { coverage, type CoverageReport } from "./coverage.js";
export { toByteSegments, tensorStrides, rowMajorStrides, type ByteSegment } from "./segments.js";
