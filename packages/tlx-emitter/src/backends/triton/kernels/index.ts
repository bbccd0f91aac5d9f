// Barrel of the kernel templates: each returns a complete Python module (imports, the device
// primitives from `ovl_runtime.language` among them, + one `@triton.jit` kernel) and is described by a KernelTemplateInfo the manifest follows.
export {
  checkGemmParams,
  checkLaunch,
  DEVICE_MODULE,
  devicePrimitivesUsed,
  type GemmParams,
  type KernelTemplateInfo,
  type LaunchOptions,
  type SourceOptions,
} from "./common.js";
export { AG_GEMM_CONSUMER, agGemmConsumerSource } from "./ag-gemm-consumer.js";
export { GEMM_PRODUCER, gemmProducerSource } from "./gemm-producer.js";
export {
  RS_REDUCE,
  RS_REDUCE_TILE_ELEMENTS,
  checkRsReduceParams,
  rsReduceBlockN,
  rsReduceGrid,
  rsReduceSource,
  type RsReduceParams,
} from "./rs-reduce.js";
export { RS_REDUCE_ROWS, rsReduceRowsSource, type RsReduceRowsParams } from "./rs-reduce-rows.js";
export { AR_REDUCE_BROADCAST_ROWS, arReduceBroadcastRowsSource } from "./ar-reduce-rows.js";
export {
  RING_REDUCE,
  RING_REDUCE_FIELDS,
  SM_PULL,
  SM_PULL_FIELDS,
  SM_PUSH,
  SM_PUSH_FIELDS,
  alignmentUnit,
  checkSegmentAlignment,
  checkSmCommParams,
  ringReduceSource,
  smPullSource,
  smPushSource,
  type SmCommParams,
} from "./sm-comm.js";
export { AR_REDUCE, AR_REDUCE_BROADCAST, arReduceBroadcastSource, arReduceSource } from "./ar-reduce.js";
export {
  AR_TILE_FIELDS,
  AR_TILE_REDUCE,
  arTileReduceSource,
  checkTileCommParams,
  TILE_PUSH,
  TILE_PUSH_FIELDS,
  tilePushSource,
  tileStepRows,
  type TileCommParams,
} from "./tile-comm.js";
export { SLOT_WAIT, SLOT_WAIT_FIELDS, slotWaitSource } from "./slot-wait.js";
export { checkSlabSumParams, SLAB_SUM, type SlabSumParams, slabSumGrid, slabSumSource } from "./slab-sum.js";
export {
  checkNvshmemRows,
  NVSHMEM_FUNCTIONS,
  NVSHMEM_MODULE,
  NVSHMEM_PUSH,
  NVSHMEM_PUSH_FIELDS,
  NVSHMEM_REQUIREMENT,
  nvshmemPushSource,
  nvshmemSlot,
  nvshmemSlotCount,
} from "./nvshmem-comm.js";
