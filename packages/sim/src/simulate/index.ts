// Barrel of the simulate module: the discrete-event simulator, the cost model under it,
// the built-in hardware models and the result format.
export { SimulateError, type SimulateErrorCode } from "./errors.js";
export { HardwareModel, H100_SXM, H200_SXM, HARDWARE_MODELS, resolveHardware, TRITON_GEMM_2026_11_22 } from "./hardware.js";
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
