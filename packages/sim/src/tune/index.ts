// Barrel of the tune module: the autotuner's search space, memory pruning, cost
// functions (the simulator's, or any other), the search itself and its JSON cache.
export { TuneError, type TuneErrorCode } from "./errors.js";
export {
  TuneProblem,
  DEFAULT_TUNE_SPACE,
  candidateKey,
  enumerateCandidates,
  type TuneProblemInput,
  type TuneTile,
  type TuneBackend,
  TUNE_PLANS,
  type TunePlan,
  type TuneSpace,
  type Candidate,
  type OverlappedCandidate,
  type SequentialCandidate,
} from "./space.js";
export {
  candidateMemory,
  memoryMisfit,
  DEVICE_MEMORY_BYTES,
  HOPPER_SHARED_BYTES,
  GEMM_STAGES,
  type MemoryLimits,
  type CandidateMemory,
} from "./memory.js";
export { candidatePlan, candidateSchedule, chunkMisfit, type BuiltCandidate } from "./build.js";
export { ALL_REDUCE_VARIANTS, allReduceCandidates, type AllReduceVariant } from "./all-reduce.js";
export { simulatorCost, type CostFunction, type CostInput, type CostEstimate } from "./cost.js";
export {
  TUNE_CACHE_SCHEMA,
  TuneCache,
  TuneCacheEntry,
  StoredCandidate,
  emptyTuneCache,
  tuneCacheKey,
  lookupTune,
  storeTune,
  parseTuneCache,
  serializeTuneCache,
} from "./cache.js";
export {
  measurementSet,
  rankCandidates,
  tune,
  type RankOptions,
  type TuneOptions,
  type Ranking,
  type RankedCandidate,
  type PrunedCandidate,
  type MeasuredCandidate,
  type TuneProgress,
  type TuneResult,
} from "./tune.js";
export { decidePath, type TuneDecision, type TuneFigure } from "./decide.js";
export {
  COMPUTE_BODIES,
  DEFAULT_COMPUTE_SPACE,
  computeKey,
  computeMeasurementSet,
  computeMisfit,
  computeModel,
  computeSharedBytes,
  predictComputeMs,
  rankComputeConfigs,
  type ComputeBody,
  type ComputeConfig,
  type ComputeModel,
  type ComputeProblem,
  type ComputeRole,
  type ComputeSpace,
  type RankedCompute,
} from "./compute.js";
export { COMM_SMS_CANDIDATES, GEMM_BESIDE_COMM, chooseCommSms, type CommSmsProblem, type CommSmsChoice } from "./comm-sms.js";
