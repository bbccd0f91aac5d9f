// The manifest entry of the `nvshmem` transfer backend's communication kernel, shared by the
// operators it realises (AllGather+GEMM's chunk pushes, GEMM+RS's partial-slab pushes).
import type { Kernel } from "../../core/manifest/schema.js";
import type { ResolvedOptions } from "../../core/options.js";
import { commGrid, kernelEntry, SIGNAL_BUFFER } from "./common.js";
import { NVSHMEM_PUSH, NVSHMEM_REQUIREMENT } from "./kernels/index.js";

/** Name of the table of `nvshmem-push` segment rows (one row of `NVSHMEM_PUSH_FIELDS` per put). */
export const NVSHMEM_SEGMENTS = "push_segments";

/**
 * The `nvshmem_push` kernel on the comm stream: `count` rows of table {@link NVSHMEM_SEGMENTS}, put
 * from buffer `src` into buffer `dst` (both symmetric) on `o.commSms` programs at most, marked as
 * requiring NVSHMEM (the runner allocates through NVSHMEM and links its device library).
 */
export function nvshmemPushKernel(o: ResolvedOptions, src: string, dst: string, count: number): Kernel {
  return kernelEntry(NVSHMEM_PUSH, {
    name: "nvshmem_push",
    stream: "comm",
    grid: commGrid(o.commSms, count),
    numWarps: o.commWarps,
    numStages: 1,
    args: {
      src_ptr: { kind: "buffer", name: src },
      dst_ptr: { kind: "buffer", name: dst },
      sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      seg_ptr: { kind: "table", name: NVSHMEM_SEGMENTS },
      num_segments: { kind: "int", value: count },
      err_ptr: { kind: "error-buffer" },
      rank: { kind: "rank" },
      epoch_ptr: { kind: "epoch-word" },
      timeout_ns: { kind: "timeout-ns" },
    },
    constexprs: {},
    params: { segments: count },
    requires: [NVSHMEM_REQUIREMENT],
  });
}
