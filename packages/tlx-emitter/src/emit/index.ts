// Barrel of the emitters: plan + tile schedule → kernel sources + ovl.manifest/v1.
export { emitAgGemm, type EmitResult } from "./ag-gemm.js";
export { emitGemmRs, GEMM_RS_BUFFERS, gemmRsStages, type RsStages } from "./gemm-rs.js";
export { AR_BROADCAST_BLOCK_N, AR_STREAMS, emitGemmArPartitioned, GEMM_AR_BUFFERS } from "./gemm-ar.js";
export { emitGemmArTilewise, tileOwner, type TilewiseGemm } from "./gemm-ar-tilewise.js";
export { AR_PLANS, allReduceForm, type AllReduceForm, type Gather } from "./ar-movements.js";
export { emitManifestJson } from "./manifest-json.js";
export { type EmittedFile, SIGNAL_BUFFER } from "./common.js";
export {
  DEFAULT_COMM_SMS,
  type EmitOptions,
  gemmLaunch,
  gemmLaunchDefaults,
  HOPPER_SHARED_BYTES,
  type ResolvedOptions,
} from "./options.js";
export { planHostOps, commStreamName } from "./host-ops.js";
export { mBlockTables, type MBlockTables } from "./m-block-tables.js";
export { producerOrder } from "./producer-order.js";
export { arrivalSlot, arrivalSlotTable, type Delivery, rsDeliveries, sendOrder } from "./rs-movements.js";
export { elementRuns, pairRuns, type ElementRun } from "./segments.js";
export { examples as exampleManifests, type ExampleShape } from "./examples.js";
