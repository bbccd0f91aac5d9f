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
} from "./compile/compile.js";
export type {
  Operator,
  OperatorInput,
  OperatorKind,
  KernelBody,
  GemmProblem,
  ExpertRouting,
  MoeRouting,
  WarpSpecialization,
  AttentionProblem,
  TlxNotifier,
} from "./core/operator.js";
export { DEFAULT_GROUP_M, DEFAULT_TILE, TLX_NOTIFIERS } from "./core/operator.js";
export type { EmitResult, EmittedFile } from "./core/result.js";
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
} from "./compute/configs.js";
export { builtinOf, describeTable, resolveCompute, type ComputeChoice, type ResolveComputeOptions } from "./compute/tuned.js";
export { builtinBody, builtinBodyPath, BUILTIN_BODIES, type BuiltinBodyName } from "./core/builtin.js";
export { bindGemm, type Binding, type GemmBindingInput } from "./core/bind.js";
export { STREAM_K_BUFFERS, STREAM_K_PARAMS, STREAM_K_SLOTS, streamKScratch, type StreamKScratch } from "./schedule/stream-k.js";
export { compileAgGemm, LOCAL_CONSUMER_KIND } from "./operators/ag-gemm/triton.js";
export { compileAgGemmSilu, GEMM_SILU_MUL_BODY, GEMM_SILU_MUL_DEFAULT, gemmSiluMulBody, withSiluMulDefaults } from "./operators/ag-gemm-silu/triton.js";
export { compileMlp, MLP_STAGE_DIRS, type ChainResult, type MlpInput } from "./operators/mlp/chain.js";
export { compileAgGroupedGemm, checkRouting, GROUP_TABLE, MOE_B, MOE_C } from "./operators/ag-grouped-gemm/triton.js";
export { compileConsumer, type ConsumerSpec } from "./backends/triton/consumer.js";
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
} from "./operators/ag-moe/triton.js";
export { rowSegments, segmentMap, segmentOfRows, segmentSlotMaps, segmentWaits, type RowSegments } from "./operators/ag-moe/segments.js";
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
} from "./operators/moe-rs/triton.js";
export { compileA2aGemm, allToAllSource } from "./operators/a2a-gemm/triton.js";
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
} from "./operators/ag-attention/triton.js";
export { compileGemmRs, LOCAL_PRODUCER_KIND } from "./operators/gemm-rs/triton.js";
export { compileGemmAr, realisableArPlan } from "./operators/gemm-ar/triton.js";
export { rankMap, consumerColumns, RANK_VAR, type BuiltMap, type ConsumerColumns } from "./schedule/maps.js";
export { compiledExamples, exampleRouting, tutorialMatmulBody } from "./examples/compiled.js";
export { decomposeCollectives, hasCollectives, type DecomposeOptions } from "./schedule/decompose.js";
