// Barrel of the emitters: plan + tile schedule → kernel sources + ovl.manifest/v1.
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
  type ResolvedOptions,
} from "./core/options.js";
export { planHostOps, commStreamName } from "./schedule/host-ops.js";
export { mBlockTables, type MBlockTables } from "./schedule/m-block-tables.js";
export { producerOrder } from "./schedule/producer-order.js";
export { arrivalSlot, arrivalSlotTable, type Delivery, rsDeliveries, sendOrder } from "./schedule/rs-movements.js";
export { elementRuns, pairRuns, type ElementRun } from "./schedule/segments.js";
export { examples as exampleManifests, type ExampleShape } from "./examples/templates.js";
