// Public surface of @ovl/tlx-emitter: the contracts (operator, backend, result, registry),
// the manifest schema, the Python writer, the device primitive library, the Triton kernel
// templates and TLX parts, the local-kernel transformation, every operator and compile().
export * from "./core/manifest/schema.js";
export { manifestJsonSchema, manifestJsonSchemaText } from "./core/manifest/json-schema.js";
export * from "./core/writer/index.js";
export * from "./core/device/index.js";
export * from "./core/chain/index.js";
export * from "./backends/triton/kernels/index.js";
export * from "./local/index.js";

// The emitters of the template path: plan + tile schedule → kernel sources + ovl.manifest/v1.
export { emitAgGemm } from "./operators/ag-gemm/template.js";
export { emitGemmRs, GEMM_RS_BUFFERS, gemmRsStages, type RsStages } from "./operators/gemm-rs/template.js";
export { AR_BROADCAST_BLOCK_N, AR_STREAMS, emitGemmArPartitioned, GEMM_AR_BUFFERS } from "./operators/gemm-ar/partitioned.js";
export { emitGemmArTilewise, tileOwner, type TilewiseGemm } from "./operators/gemm-ar/tilewise.js";
export { AR_PLANS, allReduceForm, type AllReduceForm, type Gather } from "./operators/gemm-ar/movements.js";
export { emitManifestJson } from "./core/manifest/json.js";
export { SIGNAL_BUFFER } from "./backends/triton/common.js";
export {
  DEFAULT_COMM_SMS,
  type EmitOptions,
  gemmLaunch,
  gemmLaunchDefaults,
  HOPPER_SHARED_BYTES,
  NVSHMEM_OPERATORS,
  type ResolvedOptions,
  TRANSFER_BACKENDS,
  type TransferBackend,
} from "./core/options.js";
export { DEFAULT_TOLERANCE, FP8_OPERATORS, isOperatorDtype, OPERATOR_DTYPES, type OperatorDtype } from "./core/dtype.js";
export { planHostOps, commStreamName } from "./schedule/host-ops.js";
export { mBlockTables, type MBlockTables } from "./schedule/m-block-tables.js";
export { producerOrder } from "./schedule/producer-order.js";
export { arrivalSlot, arrivalSlotTable, type Delivery, rsDeliveries, sendOrder } from "./schedule/rs-movements.js";
export { elementRuns, pairRuns, type ElementRun } from "./schedule/segments.js";
export { examples as exampleManifests, type ExampleShape } from "./examples/templates.js";

// The TLX half: composable warp-specialised kernels (compute, communication and tile-order
// parts), the TLX emitters, and the worked examples.
export {
  mergeParams,
  tlxKernel,
  type TlxCommPart,
  type TlxComputePart,
  type TlxKernel,
  type TlxKernelSpec,
  type TlxLoopRole,
  type TlxPartParams,
  type EpilogueSync,
  type TlxSchedulePart,
  type TlxTask,
} from "./backends/tlx/parts.js";
export {
  defaultStages,
  EPILOGUE_BARRIER,
  MAX_DEFAULT_STAGES,
  epilogueStagingElements,
  type EpilogueSplit,
  SM90_MAX_SHARED_BYTES,
  tlxGemm,
  tlxGemmSharedBytes,
  type TlxGemmParams,
} from "./backends/tlx/compute.js";
export { PINGPONG_BARRIERS, tlxGemmPingPong, tlxPingPongSharedBytes, type TlxPingPongParams } from "./backends/tlx/compute-pingpong.js";
export {
  chunkWaitComm,
  NOTIFY_BATCH,
  producerTileNotifyComm,
  STORED_BARRIER,
  STORED_DEPTH,
  storedLag,
  tileNotifyComm,
  TMA_REDUCE_PTX,
  tmaTileNotifyComm,
  noComm,
  NOTIFY_PTX,
  PUSH_ROW_FIELDS,
  pushCommTask,
  WAIT_PTX,
  type PushCommTaskOptions,
} from "./backends/tlx/comm.js";
export {
  SM100_MAX_SHARED_BYTES,
  SM100_TMEM_COLUMNS,
  tlxBlackwellKernel,
  tlxGemmBlackwell,
  tlxGemmBlackwellSharedBytes,
  type TlxBlackwellComputePart,
  type TlxBlackwellKernelSpec,
  type TlxGemmBlackwellParams,
} from "./backends/tlx/compute-blackwell.js";
export { clcTiles, groupedTiles, type ClcTilesOptions, type GroupedTilesOptions } from "./backends/tlx/tile-order.js";
export { MBLOCK_VAR, mblockArgs, mblockKernelArgs, mblockMap, writeMblockRead } from "./backends/tlx/mblock-map.js";
export { pushRows, type PushRows } from "./backends/tlx/push-rows.js";
export { MAX_STORE_GROUPS, TLX_DEVICE_FUNCTIONS, writeTlxLibrary } from "./backends/tlx/library.js";
export { emitTlxGemm, type TlxEmitOptions, type TlxEmitResult, type TlxTarget } from "./backends/tlx/gemm.js";
export { emitTlxAgGemm } from "./operators/ag-gemm/tlx.js";
export { tlxBlackwellExamples, tlxExamples, type TlxExampleShape } from "./examples/tlx.js";
export {
  emitTlxGemmRs,
  TLX_GEMM_RS_KIND,
  tlxProducerFactory,
  type TlxProducerOptions,
} from "./operators/gemm-rs/tlx.js";

// The compile path: an Operator (local body + chunk plan + backend choices), the registry
// of operators, and the one compile() that the CLI, the tuner, the bench and users call.
export { compile, compileOperator, realisablePlan, type CompileOptions, type CompiledOperator } from "./compile/compile.js";
export { tritonBackend, tlxBackend, fastestBackend, type TlxBackendOptions } from "./compile/backends.js";
export { BACKEND_SPECIFICATION, type Backend } from "./core/backend.js";
export {
  SHARED_OPTIONS,
  type OperatorCli,
  type OperatorCompute,
  type OperatorDefinition,
  type OptionDeclaration,
  type SharedOption,
  type TlxRealiseOptions,
} from "./core/registry.js";
export { OPERATOR_REGISTRY, operatorDefinition } from "./operators/index.js";
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
  RowsRequest,
} from "./core/operator.js";
export { instantiateRows, servesRows } from "./core/manifest/rows.js";
export { minRowsPerRank, ROWS_VARIABLE } from "./operators/ag-gemm/rows.js";
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
export { assetFiles, assetRoot } from "./core/assets.js";
export { bindGemm, type Binding, type GemmBindingInput } from "./core/bind.js";
export { STREAM_K_BUFFERS, STREAM_K_PARAMS, STREAM_K_SLOTS, streamKScratch, type StreamKScratch } from "./schedule/stream-k.js";
export { compileAgGemm, LOCAL_CONSUMER_KIND } from "./operators/ag-gemm/triton.js";
export {
  compileAgGemmSilu,
  GEMM_SILU_MUL_BODY,
  GEMM_SILU_MUL_DEFAULT,
  gemmSiluMulBody,
  withSiluMulDefaults,
} from "./operators/ag-gemm-silu/triton.js";
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
  checkAgMoeRows,
  moeMinRowsPerRank,
  moeRowsMaps,
  MOE_ROWS_PROGRAMS,
  type MoeRowsMaps,
  type MoeRowsShape,
} from "./operators/ag-moe/rows.js";
export { compileAgMoeRows } from "./operators/ag-moe/rows-compile.js";
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
export { compileAgAttentionRows } from "./operators/ag-attention/rows-compile.js";
export { attentionRowsGroups, checkAgAttentionRows, type AttentionRowsGroups } from "./operators/ag-attention/rows.js";
export { compileGemmRs, LOCAL_PRODUCER_KIND } from "./operators/gemm-rs/triton.js";
export { compileGemmAr, realisableArPlan } from "./operators/gemm-ar/triton.js";
export { rankMap, consumerColumns, RANK_VAR, type BuiltMap, type ConsumerColumns } from "./schedule/maps.js";
export { compiledExamples, exampleRouting, tutorialMatmulBody } from "./examples/compiled.js";
export { decomposeCollectives, hasCollectives, type DecomposeOptions } from "./schedule/decompose.js";
