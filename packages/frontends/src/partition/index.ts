// Barrel of the partition IR frontend: sharding specs, the collective they imply, and their
// lowering to chunk plans by the direct, template or synthesised path.
export { shard, replicate, partialSum, rankRegion, meshGroup, checkSpec, type Placement, type ShardingSpec } from "./spec.js";
export { inferCollective, type AxisTransition, type ImpliedCollective } from "./infer.js";
export { lowerReshard, partialName, type LoweringPath, type ReshardOptions, type LoweredReshard } from "./lower.js";
