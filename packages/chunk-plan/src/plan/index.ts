// Barrel of the plan module: hand-written plan construction, meshes, shards, the split
// knob and stream assignment.
export { PlanError, type PlanErrorCode } from "./errors.js";
export { worldSize, meshRanks, meshCoords, rankOf } from "./mesh.js";
export {
  partition,
  fullRegion,
  shardRegion,
  shardSpanRegion,
  splitChunks,
  type Span,
  type TensorShape,
} from "./shard.js";
export { opAccesses, type Access } from "./access.js";
export {
  PlanBuilder,
  opRef,
  computeDep,
  push,
  pull,
  localCopy,
  collective,
  type OpRef,
  type OpInput,
  type OpOptions,
} from "./builder.js";
export { checkPlanStructure } from "./structure.js";
export { split, splitOp, isSplittable } from "./split.js";
export { assignStreams, roundRobin, type StreamPolicy } from "./streams.js";
