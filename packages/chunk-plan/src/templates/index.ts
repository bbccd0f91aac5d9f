// Barrel of the templates module: ready-made chunk plans for the common collectives
// (AutoOverlap §5.1 "pre-defined templates"), each an ordinary function of its options.
export {
  templateContext,
  type TensorSpec,
  type TemplateOptions,
  type ReductionOptions,
  type TemplateContext,
} from "./common.js";
export {
  allGatherRing,
  allGatherSwizzle,
  ringAllGatherOps,
  swizzleAllGatherOps,
  type TransferSide,
  type RingAllGatherOptions,
  type SwizzleAllGatherOptions,
} from "./all-gather.js";
export { allGatherHierarchical, type HierarchicalAllGatherOptions } from "./all-gather-hierarchical.js";
export { reduceScatterHierarchical, type HierarchicalReduceScatterOptions } from "./reduce-scatter-hierarchical.js";
export {
  reduceScatterRing,
  reduceScatterDirect,
  ringReduceScatterOps,
  directReduceScatterOps,
  type ReduceScatterOptions,
} from "./reduce-scatter.js";
export {
  allReducePartitioned,
  allReduceTilewise,
  tileRegions,
  type PartitionedAllReduceOptions,
  type TilewiseAllReduceOptions,
} from "./all-reduce.js";
export { allToAll, type AllToAllOptions } from "./all-to-all.js";
export { collectiveDirect, type CollectiveDirectOptions } from "./collective-direct.js";
