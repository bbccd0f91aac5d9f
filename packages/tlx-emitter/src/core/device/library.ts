// The device-side primitive library (TileLink §3 Table 3 on SMs) is one Python module shipped
// with the runner, `ovl_runtime.language`, which every emitted kernel — plain Triton and TLX —
// imports (`kernels/common.ts` `kernelModule`, `tlx/parts.ts` `tlxModule`): acquire loads and
// a bounded, wrap-aware wait that records a timeout instead of hanging; the token that keeps
// loads below a wait; the device epoch target; release notifies on a local or peer slot;
// peer tile loads and stores through a peer-pointers table. Here: their names and the
// element types kernels compute in.

/**
 * Element types kernels compute in, and their `tl` names. `fp8e4m3` is OCP FP8 E4M3 (torch's
 * `float8_e4m3fn`, Triton's `tl.float8e4nv`): operands only (AllGather+GEMM's A and B), whose
 * product is accumulated in fp32 and written as bf16 (see `core/dtype.ts`).
 */
export const TL_DTYPE = { bf16: "tl.bfloat16", fp16: "tl.float16", fp32: "tl.float32", fp8e4m3: "tl.float8e4nv" } as const;
/** An element type a kernel template accepts. */
export type ElementType = keyof typeof TL_DTYPE;

/** Bytes per element of each {@link ElementType}: the one table copies, TMA rows and tile lookups size by. */
export const ELEMENT_BYTES: Readonly<Record<ElementType, number>> = { bf16: 2, fp16: 2, fp32: 4, fp8e4m3: 1 };

/** Names `ovl_runtime.language` defines (its `DEVICE_FUNCTIONS`; a test checks both lists agree), so emitters refer to them by one spelling. */
export const DEVICE_FUNCTIONS = [
  "ld_acquire_sys",
  "global_timer",
  "load_epoch_target",
  "wait_slot",
  "consume_token",
  "notify_slot",
  "notify_slot_gpu",
  "notify_slot_if",
  "notify_slot_gpu_if",
  "peer_notify",
  "peer_notify_many",
  "peer_base",
  "peer_tile_load",
  "peer_tile_store",
] as const;
