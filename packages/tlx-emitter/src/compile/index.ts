// Barrel of the compile path: an Operator (local body + chunk plan + backend choices) and the
// one compile() that the CLI, the tuner, the bench and users call.
export {
  compile,
  realisablePlan,
  tritonBackend,
  tlxBackend,
  fastestBackend,
  BACKEND_SPECIFICATION,
  type Backend,
  type CompileOptions,
  type TlxBackendOptions,
} from "./backend.js";
export type {
  Operator,
  OperatorInput,
  OperatorKind,
  KernelBody,
  GemmProblem,
  ExpertRouting,
  MoeRouting,
  WarpSpecialization,
} from "./operator.js";
export { DEFAULT_GROUP_M, DEFAULT_TILE } from "./operator.js";
export {
  COMPUTE_CONFIGS_SCHEMA,
  ComputeConfigEntry,
  ComputeConfigTable,
  TlxConfigEntry,
  candidateTables,
  computeConfigPath,
  computeConfigTargets,
  computeConfigs,
  lookupComputeConfig,
  lookupFirst,
  parseComputeConfigs,
  type ComputeMatch,
  type ComputeQuery,
} from "./configs.js";
export { builtinOf, describeTable, resolveCompute, type ComputeChoice, type ResolveComputeOptions } from "./tuned.js";
export { builtinBody, builtinBodyPath, BUILTIN_BODIES, type BuiltinBodyName } from "./builtin.js";
export { bindGemm, type Binding, type GemmBindingInput } from "./bind.js";
export { STREAM_K_BUFFERS, STREAM_K_PARAMS, STREAM_K_SLOTS, streamKScratch, type StreamKScratch } from "./stream-k.js";
export { compileAgGemm, LOCAL_CONSUMER_KIND } from "./ag-gemm.js";
export { compileAgGemmSilu, GEMM_SILU_MUL_BODY, GEMM_SILU_MUL_DEFAULT, gemmSiluMulBody, withSiluMulDefaults } from "./ag-gemm-silu.js";
export { compileMlp, MLP_STAGE_DIRS, type ChainResult, type MlpInput } from "./mlp.js";
export { compileAgGroupedGemm, checkRouting, GROUP_TABLE, MOE_B, MOE_C } from "./ag-grouped-gemm.js";
export { compileConsumer, type ConsumerSpec } from "./consumer.js";
export {
  checkMoeRouting,
  compileAgMoe,
  MOE_ALIGN_KINDS,
  MOE_BUFFERS,
  MOE_DEFAULT_TILE,
  moeAlignSizes,
  moeBindings,
  routingKernels,
  routingModule,
  type MoeAlignSizes,
} from "./ag-moe.js";
export { rowSegments, segmentMap, segmentOfRows, segmentSlotMaps, segmentWaits, type RowSegments } from "./moe-segments.js";
export {
  compileMoeRs,
  LOCAL_MOE_RS_KIND,
  MOE_RS_BUFFERS,
  MOE_RS_DEFAULT_BT,
  MOE_RS_DEFAULT_BODY,
  MOE_RS_DEFAULT_TILE,
  MOE_RS_DEFAULT_REDUCERS,
  MOE_RS_EXPECT_STEP,
  MOE_RS_KINDS,
  moePermuteKernel,
  moeRsModule,
  moeRsNotifyKernel,
  moeTopkSumKernel,
  moeRsReadySlot,
  moeRsRunnerKernels,
  moeRsSizes,
  moeRsSlabTokens,
  slabCover,
  type MoeRsNotifies,
  type MoeRsProblem,
  type MoeRsSizes,
  type MoeRsTile,
} from "./moe-rs.js";
export { compileA2aGemm, allToAllSource } from "./a2a-gemm.js";
export {
  ATTN_O,
  ATTN_Q,
  attentionGemmView,
  attentionLaunch,
  attentionSchedule,
  checkAttention,
  compileAgAttention,
  DEFAULT_ATTENTION_BLOCKS,
  defaultAttentionTile,
  type AttentionProblem,
} from "./ag-attention.js";
export { compileGemmRs, LOCAL_PRODUCER_KIND } from "./gemm-rs.js";
export { compileGemmAr, realisableArPlan } from "./gemm-ar.js";
export { rankMap, consumerColumns, RANK_VAR, type BuiltMap, type ConsumerColumns } from "./maps.js";
export { compiledExamples, exampleRouting, tutorialMatmulBody } from "./examples.js";
export { decomposeCollectives, hasCollectives, type DecomposeOptions } from "./decompose.js";
