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
} from "./parts.js";
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
} from "./compute.js";
export { PINGPONG_BARRIERS, tlxGemmPingPong, tlxPingPongSharedBytes, type TlxPingPongParams } from "./compute-pingpong.js";
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
} from "./comm.js";
export {
  SM100_MAX_SHARED_BYTES,
  SM100_TMEM_COLUMNS,
  tlxBlackwellKernel,
  tlxGemmBlackwell,
  tlxGemmBlackwellSharedBytes,
  type TlxBlackwellComputePart,
  type TlxBlackwellKernelSpec,
  type TlxGemmBlackwellParams,
} from "./compute-blackwell.js";
export { clcTiles, groupedTiles, type ClcTilesOptions, type GroupedTilesOptions } from "./schedule.js";
export { MBLOCK_VAR, mblockArgs, mblockKernelArgs, mblockMap, writeMblockRead } from "./mblock-map.js";
export { pushRows, type PushRows } from "./push-rows.js";
export { MAX_STORE_GROUPS, TLX_DEVICE_FUNCTIONS, writeTlxLibrary } from "./library.js";
export { emitTlxAgGemm, emitTlxGemm, type TlxEmitOptions, type TlxEmitResult, type TlxTarget } from "./emit.js";
export { tlxBlackwellExamples, tlxExamples, type TlxExampleShape } from "./examples.js";
export {
  emitTlxGemmRs,
  TLX_GEMM_RS_KIND,
  TLX_NOTIFIERS,
  tlxProducerFactory,
  type TlxNotifier,
  type TlxProducerOptions,
} from "./gemm-rs.js";
