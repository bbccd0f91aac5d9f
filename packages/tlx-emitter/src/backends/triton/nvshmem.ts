// The manifest entry of the `nvshmem` transfer backend's communication kernel, shared by the
// operators it realises (AllGather+GEMM's chunk pushes, GEMM+RS's partial-slab pushes).
import type { ChunkPlan } from "@ovl/chunk-plan";
import type { EmittedFile } from "../../core/result.js";
import type { Kernel, Table } from "../../core/manifest/schema.js";
import type { ResolvedOptions } from "../../core/options.js";
import { EmitError } from "../../core/writer/index.js";
import type { PlanSignals } from "../../schedule/host-ops.js";
import { nvshmemPlanRows } from "../../schedule/nvshmem-rows.js";
import { commGrid, kernelEntry, SIGNAL_BUFFER } from "./common.js";
import { checkNvshmemRows, NVSHMEM_PUSH, NVSHMEM_REQUIREMENT, nvshmemPushSource } from "./kernels/index.js";

/** Name of the table of `nvshmem-push` segment rows (one row of `NVSHMEM_PUSH_FIELDS` per put). */
export const NVSHMEM_SEGMENTS = "push_segments";

/**
 * The `nvshmem_push` kernel on the comm stream: `count` rows of table {@link NVSHMEM_SEGMENTS}, put
 * from buffer `src` into buffer `dst` (both symmetric) on `o.commSms` programs at most, marked as
 * requiring NVSHMEM (the runner allocates through NVSHMEM and links its device library). A manifest
 * with two such kernels (other buffers) names the second and its table (`as`); its source file is
 * `<name>.py`.
 */
export function nvshmemPushKernel(
  o: ResolvedOptions,
  src: string,
  dst: string,
  count: number,
  as: { readonly name: string; readonly table: string } = { name: "nvshmem_push", table: NVSHMEM_SEGMENTS },
): Kernel {
  return kernelEntry(NVSHMEM_PUSH, {
    name: as.name,
    stream: "comm",
    grid: commGrid(o.commSms, count),
    numWarps: o.commWarps,
    numStages: 1,
    args: {
      src_ptr: { kind: "buffer", name: src },
      dst_ptr: { kind: "buffer", name: dst },
      sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      seg_ptr: { kind: "table", name: as.table },
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

/** What an operator adds for its transfers on the `nvshmem` backend. */
export interface NvshmemTransfers {
  readonly table: Table;
  readonly kernel: Kernel;
  readonly file: EmittedFile;
}

/**
 * The `nvshmem` realisation of an AllGather plan's transfers into `gathered` (a signal buffer of
 * `slots` int32 slots): one `nvshmem-push` row per push (`nvshmemPlanRows`), the table padded to
 * one length over the ranks, and the kernel.
 * @throws {EmitError} as `nvshmemPlanRows`, and for a plan that puts another tensor than `gathered`.
 */
export function nvshmemTransfers(
  plan: ChunkPlan,
  signals: PlanSignals,
  world: number,
  gathered: string,
  o: ResolvedOptions,
  slots: number,
): NvshmemTransfers {
  const { src, dst, rows } = nvshmemPlanRows(plan, signals, world);
  if (src !== gathered || dst !== gathered)
    throw new EmitError(
      "bad-plan",
      `plan "${plan.name}" puts ${src} into ${dst}; an AllGather+GEMM over NVSHMEM gathers ${gathered} in place`,
    );
  const count = Math.max(1, ...rows.map((r) => r.length));
  // Rows of length 0 with no wait and no signal pad every rank's table to one length.
  const values = rows.map((r) => [...r, ...Array.from({ length: count - r.length }, () => [0, 0, 0, 0, -1, 0, -1])].flat());
  for (const v of values) checkNvshmemRows(v, slots);
  return {
    table: { name: NVSHMEM_SEGMENTS, dtype: "int64", values },
    kernel: nvshmemPushKernel(o, gathered, gathered, count),
    file: { path: "nvshmem_push.py", text: nvshmemPushSource({ dtype: o.dtype }) },
  };
}
