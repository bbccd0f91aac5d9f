// AllGather + GEMM as one warp-specialised TLX kernel: the TMA producer waits on the chunk
// slot of the rows it is about to load (copy-engine transport), or a communication warp group
// in every CTA pushes this rank's chunks itself (comm-task transport).
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import { checkPositive } from "../../backends/triton/kernels/common.js";
import { alignmentUnit, checkSegmentAlignment } from "../../backends/triton/kernels/sm-comm.js";
import { type Buffer, type KernelArg, MANIFEST_SCHEMA, type Table, type TileProgramSpec } from "../../core/manifest/schema.js";
import { agGemmReference, checkDistinctBuffers, checkPlanAndSchedule, signalBuffer, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import type { EmitResult } from "../../core/result.js";
import { planHostOps } from "../../schedule/host-ops.js";
import { mBlockTables } from "../../schedule/m-block-tables.js";
import { resolveOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import { RANK_VAR, tablesOf } from "../../schedule/maps.js";
import { EmitError } from "../../core/writer/index.js";
import { chunkWaitComm, pushCommTask, PUSH_ROW_FIELDS } from "../../backends/tlx/comm.js";
import { tlxKernel } from "../../backends/tlx/parts.js";
import { pushRows } from "../../backends/tlx/push-rows.js";
import { mblockKernelArgs, mblockMap } from "../../backends/tlx/mblock-map.js";
import { groupedTiles } from "../../backends/tlx/tile-order.js";
import {
  clusterOf,
  gemmArgs,
  hopperGemmPart,
  refuseNotifier,
  targetOf,
  tileParams,
  tlxEntry,
  type TlxEmitOptions,
  type TlxEmitResult,
} from "../../backends/tlx/gemm.js";
import { tlxKnobs } from "../../backends/tlx/knobs.js";
import { operatorSchedule } from "../../schedule/operator-schedule.js";
import { planTensor } from "../../backends/triton/consumer.js";
import type { Operator } from "../../core/operator.js";
import type { TlxRealiseOptions } from "../../core/registry.js";

/** `tlxBackend`'s realisation of an ag-gemm operator: its warp-specialisation knobs applied to {@link emitTlxAgGemm}. */
export async function realiseTlxAgGemm(op: Operator, options: TlxRealiseOptions): Promise<EmitResult> {
  const { rest, knobs } = tlxKnobs(op);
  if (op.warpSpecialization?.notifier !== undefined)
    throw new EmitError("bad-param", `warpSpecialization.notifier applies to gemm-rs; ${op.kind} notifies nothing per tile`);
  const schedule = operatorSchedule(op, planTensor(op, "AllGather+GEMM"), "consumer", true);
  const r = emitTlxAgGemm(op.plan, schedule, {
    ...rest,
    ...knobs,
    name: op.name,
    ...(options.comm === undefined ? {} : { comm: options.comm }),
  });
  return { files: r.files, manifest: r.manifest, expect: r.expect };
}

/**
 * TLX AllGather+GEMM from an AllGather plan over the rows of `A` and its consumer tile
 * schedule (the inputs of `emitAgGemm`). The kernel visits m-blocks in the schedule's
 * order (`mblock_order`); its producer waits on the chunk slot of the rows it is about
 * to load (`mblock_wait_slot`, -1 = local rows). Transport (`options.comm`):
 * - `copy-engine` (variant a): the plan's copies as host ops with stream-written signals,
 *   exactly as the plain path; the wait target is epoch × 1, the epoch read on the device
 *   from the rank's epoch word (`epoch_ptr`).
 * - `comm-task` (variant b): a communication warp group in every CTA pushes this rank's
 *   chunks to the peers (`push_rows`, `commPieces` rows per chunk) and arrives on their
 *   slots; no host ops; the wait target is epoch × arrivals (pieces per chunk).
 * @throws {EmitError} like `emitAgGemm`, and `unsupported-dependency` / `bad-plan` when
 *   the communication task gets a plan that is not a dependency-free push; `bad-param`
 *   for `target: "sm_100a"` (not composed with the Blackwell compute part).
 */
export function emitTlxAgGemm(plan: ChunkPlan, schedule: TileSchedule, options: TlxEmitOptions = {}): TlxEmitResult {
  if (targetOf(options) !== "sm_90a") {
    throw new EmitError(
      "bad-param",
      "emitTlxAgGemm emits sm_90a only: the chunk-wait and push communication parts are not composed with the sm_100a compute part; use emitTlxGemm for sm_100a",
    );
  }
  const o = resolveOptions(options);
  refuseNotifier(options, "AllGather+GEMM's consumer waits and notifies nothing");
  const transport = options.comm ?? "copy-engine";
  if (transport !== "copy-engine" && transport !== "comm-task")
    throw new EmitError("bad-param", `comm must be "copy-engine" or "comm-task", got ${String(transport)}`);
  if (transport === "comm-task" && (options.clusterM ?? 1) !== 1)
    throw new EmitError("bad-param", "clusterM 2 is built with copy-engine transport only: the communication task runs beside clusterM 1");
  const { signals, world, tensor } = checkPlanAndSchedule(plan, schedule, "consumer");
  const { M, N, K } = schedule.tiling.problem;
  if (tensor.shape[1] !== K)
    throw new EmitError("bad-plan", `tensor ${tensor.name} is [${tensor.shape.join(", ")}]; the GEMM reads it as [M, K] = [${M}, ${K}]`);
  if (tensor.dtype !== o.dtype) throw new EmitError("bad-plan", `tensor ${tensor.name} is ${tensor.dtype} but options.dtype is ${o.dtype}`);
  if (K % 8 !== 0 || N % 8 !== 0) throw new EmitError("bad-param", `TMA needs 16-byte rows: K (${K}) and N (${N}) must be multiples of 8`);
  const tile = { BM: schedule.tiling.tile.BM, BN: schedule.tiling.tile.BN, BK: options.blockK ?? schedule.tiling.tile.BK };
  const { numPidM, numTiles } = schedule.grid;
  const perRank = schedule.ranks
    .slice()
    .sort((a, b) => a.rank - b.rank)
    .map((r) => mBlockTables(r, numPidM, r.tables.waitSlot, () => 1));
  const copyOps = planHostOps(plan, signals);
  const pushes =
    transport === "comm-task"
      ? pushRows(copyOps, world, checkPositive(options.commPieces ?? 4, "commPieces"), alignmentUnit(o.dtype))
      : undefined;
  if (pushes !== undefined) for (const r of pushes.rows) checkSegmentAlignment(r, PUSH_ROW_FIELDS, ["src_offset", "dst_offset"], o.dtype);
  // The visit order and each m-block's chunk slot: inline where one expression over (m-block,
  // rank) fits every rank, else the tables `mblock_order` and `mblock_wait_slot`.
  const order = mblockMap(
    "mblock_order",
    perRank.map((t) => t.order),
  );
  const slot = mblockMap(
    "mblock_wait_slot",
    perRank.map((t) => t.slot),
  );
  const kernel = tlxKernel({
    kind: transport === "comm-task" ? "tlx-ag-gemm-push" : "tlx-ag-gemm",
    entry: transport === "comm-task" ? "tlx_ag_gemm_push" : "tlx_ag_gemm",
    summary:
      transport === "comm-task"
        ? "tlx-ag-gemm-push: C = AllGather(A) @ B; a communication task pushes chunks and arrives remotely, the producer waits locally."
        : "tlx-ag-gemm: C = AllGather(A) @ B; the producer waits on the chunk slot of the rows it is about to load.",
    compute: hopperGemmPart(tile, o.dtype, {
      ...options,
      ...(options.consumerRegisters === undefined && pushes !== undefined ? { consumerRegisters: 208 } : {}),
    }),
    comm:
      pushes === undefined
        ? [chunkWaitComm(slot.map, 1)]
        : [chunkWaitComm(slot.map, pushes.arrivals), pushCommTask({ block: options.commBlock ?? 2048 })],
    schedule: groupedTiles({
      groupM: options.groupM ?? schedule.tiling.groupSizeM,
      order: order.map,
      clusterM: clusterOf(options, numPidM),
    }),
  });
  const slots = Math.max(1, ...signals.slots.map((e) => e.slots.length));
  const buffers: Buffer[] = [
    { name: tensor.name, shape: [M, K], dtype: o.dtype, symmetric: true, init: "random" },
    { name: "gemm_b", shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: "gemm_c", shape: [M, N], dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(slots, pushes === undefined),
  ];
  checkDistinctBuffers(buffers);
  const tables: Table[] = tablesOf([order, slot]);
  const args: Record<string, KernelArg> = {
    ...gemmArgs(tensor.name, M, N, K),
    ...mblockKernelArgs([order, slot]),
    sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
    err_ptr: { kind: "error-buffer" },
    [RANK_VAR]: { kind: "rank" },
    // The producer reads the epoch on the device (`load_epoch_target`, × the WAIT_ARRIVALS constexpr).
    epoch_ptr: { kind: "epoch-word" },
    timeout_ns: { kind: "timeout-ns" },
  };
  if (pushes !== undefined) {
    tables.push({ name: "push_rows", dtype: "int64", values: pushes.rows });
    Object.assign(args, {
      src_ptr: { kind: "buffer", name: tensor.name },
      dst_ptrs: { kind: "peer-pointers", buffer: tensor.name },
      sig_ptrs: { kind: "peer-pointers", buffer: SIGNAL_BUFFER },
      push_ptr: { kind: "table", name: "push_rows" },
      num_pushes: { kind: "int", value: (pushes.rows[0]?.length ?? 0) / PUSH_ROW_FIELDS.length },
    } satisfies Record<string, KernelArg>);
  }
  const name = kernel.info.entry;
  const program: TileProgramSpec = { role: "consumer", order: order.map, slots: [slot.map], numPidM, numPidN: schedule.grid.numPidN };
  const entry = tlxEntry(
    kernel,
    name,
    [{ kind: "num-sms", cap: numTiles }],
    args,
    { M, N, K, ...tileParams(tile), transport },
    "sm_90a",
    program,
  );
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: options.name ?? name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots, bits: 32 },
    tables,
    kernels: [entry],
    hostOps: pushes === undefined ? copyOps : [],
    reference: agGemmReference(tensor.name, { M, N, K }, world, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  return { files: [{ path: entry.source, text: kernel.source }], manifest, expect: { [entry.name]: kernel.expect } };
}
