// Barrel of the TLX half of the emitter: composable warp-specialised kernels (compute,
// communication and schedule parts), the TLX emitters, and the worked examples.
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
export { emitTlxAgGemm, emitTlxGemm, type TlxEmitOptions, type TlxEmitResult, type TlxTarget } from "./backends/tlx/gemm.js";
export { tlxBlackwellExamples, tlxExamples, type TlxExampleShape } from "./examples/tlx.js";
export {
  emitTlxGemmRs,
  TLX_GEMM_RS_KIND,
  tlxProducerFactory,
  type TlxProducerOptions,
} from "./operators/gemm-rs/tlx.js";
