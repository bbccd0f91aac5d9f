// Barrel of the simulate module: the discrete-event simulator, the cost model under it,
// the built-in hardware models and the result format.
export { SimulateError, type SimulateErrorCode } from "./errors.js";
export { HardwareModel, H100_SXM, H200_SXM, HARDWARE_MODELS, TRITON_GEMM_2026_11_22 } from "./hardware.js";
export { resolveHardware } from "./registry.js";
export {
  NetworkModel,
  NodeTopology,
  type HasTopology,
  nodeOf,
  nicOf,
  crossesNodes,
  ranksPerNode,
  nodesSpanned,
  modelGpus,
} from "./network.js";
export {
  multiNode,
  type MultiNodeOptions,
  NDR400_PER_GPU,
  NETWORK_SOURCE,
  H200_SXM_2x8,
  H200_SXM_4x8,
  MULTI_NODE_MODELS,
} from "./multi-node.js";
export {
  type GemmProblem,
  tileMs,
  gemmMs,
  copyLaunchMs,
  streamWriteMs,
  copyEngineMs,
  portGBps,
  collectiveMs,
  hbmPassMs,
  reduceKernelGBps,
  reducePassMs,
  smCopyGBps,
  SM_STORE_BYTES_PER_US,
  streamKSplit,
} from "./cost.js";
export { type CommBackend, type OpTiming, type CommSimInput, simulateComm } from "./comm.js";
export { type ComputeTiming, type WaveTiming, type ComputeSimInput, simulateCompute, regionDoneAt } from "./compute.js";
export { SIM_RESULT_SCHEMA, TimelineEvent, RankSimulation, SimulationResult } from "./result.js";
export { simulate, overlapRatio, tritonTileFactor, allReduceOptions, type SimulateOptions } from "./simulate.js";
export { predictBaselines, type BaselineInput, type BaselinePrediction } from "./baselines.js";
