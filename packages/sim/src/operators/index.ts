// Barrel of the operator models: one prediction format and one model per operator (GEMM
// family through the simulator, AG + attention, AG + Gather + GroupGEMM, GroupGEMM + Scatter +
// TopK-reduce + ReduceScatter), with the calibration constants of the attention and MoE bodies.
export {
  type BoundResource,
  type OperatorPrediction,
  type SlabArrivals,
  operatorPrediction,
  slabArrivals,
  chunkPipeline,
} from "./prediction.js";
export { ATTENTION_BODY, ATTENTION_SOURCE, MOE_BODY, MOE_ROUTING_BLOCKS, MOE_RS_BODY, MOE_RS_SOURCE, MOE_SOURCE } from "./calibration.js";
export { type AttentionProblem, attentionSlabFlops, attentionComputeMs, predictAgAttention } from "./attention.js";
export {
  type MoeProblem,
  type MoeBlock,
  type MoeTiling,
  MOE_DEFAULT_TILING,
  moeRouting,
  moeBlocks,
  moeComputeMs,
  moeProgramsPerSm,
  predictAgMoe,
} from "./moe.js";
export { type MoeRsNotifies, type MoeRsOptions, moeRsProducerMs, predictMoeRs } from "./moe-rs.js";
export {
  GEMM_OPERATORS,
  GEMM_OPERATOR_CONFIG,
  type GemmOperator,
  type GemmOperatorProblem,
  predictGemmOperator,
} from "./gemm.js";
