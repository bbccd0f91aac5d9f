// AllGather + GEMM (AutoOverlap §5.2 consumer; TileLink's AG+GEMM): the plan's transfers
// on the copy engine with stream-written chunk signals, and the `ag-gemm-consumer` kernel
// visiting m-blocks in the schedule's arrival order, waiting per tile on its chunk slot.
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import {
  AG_GEMM_CONSUMER,
  agGemmConsumerSource,
  checkGemmParams,
  type GemmParams,
  nvshmemSlot,
  nvshmemSlotCount,
} from "../../backends/triton/kernels/index.js";
import { nvshmemTransfers } from "../../backends/triton/nvshmem.js";
import { MANIFEST_SCHEMA, type Buffer, type Table } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import {
  agGemmReference,
  checkDistinctBuffers,
  checkPlanAndSchedule,
  kernelEntry,
  signalBuffer,
  SIGNAL_BUFFER,
} from "../../backends/triton/common.js";
import { planHostOps } from "../../schedule/host-ops.js";
import { mBlockTables } from "../../schedule/m-block-tables.js";
import { type EmitOptions, gemmLaunch, resolveOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import type { EmitResult } from "../../core/result.js";
import { refuseFp8Template } from "../../core/dtype.js";

/**
 * Emit AllGather+GEMM `C[M,N] = AllGather(A)[M,K] @ B[K,N]` from an AllGather plan over
 * the rows of `A` (e.g. `allGatherSwizzle({side: "push"})`, `allGatherRing`) and its
 * consumer schedule. Buffers: the plan tensor `A` (symmetric), `gemm_b`, `gemm_c`
 * (poisoned), `signals`. Host ops: each P2P op of rank r, stream s becomes `copy` ops on
 * rank r's stream `comm<s>`, the last signalling `(rank, slot)` of the chunk; the kernel
 * reads per rank the m-block visit order and per-m-block wait slot (`-1` = local). With
 * `options.backend` `nvshmem` the pushes are rows of an `nvshmem-push` kernel instead (one NVSHMEM
 * put with signal per chunk, `nvshmemTransfers`), and chunk slot s is int32 slot 2s.
 * @throws {EmitError} for a schedule that is not row-blocked (a tile on two slots, an
 *   m-block on two), chunk slots with several writers, collectives or reductions in the
 *   plan, dependencies a host stream cannot wait on, or bad options.
 */
export function emitAgGemm(plan: ChunkPlan, schedule: TileSchedule, options: EmitOptions = {}): EmitResult {
  const o = resolveOptions(options);
  refuseFp8Template(o.dtype, "the AllGather+GEMM template kernel");
  const { signals, world, tensor } = checkPlanAndSchedule(plan, schedule, "consumer");
  const { M, N, K } = schedule.tiling.problem;
  if (tensor.shape[1] !== K)
    throw new EmitError("bad-plan", `tensor ${tensor.name} is [${tensor.shape.join(", ")}]; the GEMM reads it as [M, K] = [${M}, ${K}]`);
  if (tensor.dtype !== o.dtype) throw new EmitError("bad-plan", `tensor ${tensor.name} is ${tensor.dtype} but options.dtype is ${o.dtype}`);
  const params: GemmParams = checkGemmParams({
    M,
    N,
    K,
    BLOCK_M: schedule.tiling.tile.BM,
    BLOCK_N: schedule.tiling.tile.BN,
    BLOCK_K: options.blockK ?? schedule.tiling.tile.BK,
    GROUP_M: options.groupM ?? schedule.tiling.groupSizeM,
  });
  const { numPidM, numTiles } = schedule.grid;
  const perRank = schedule.ranks
    .slice()
    .sort((a, b) => a.rank - b.rank)
    .map((r) =>
      mBlockTables(r, numPidM, r.tables.waitSlot, (_slot, v) => {
        const arrivals = r.tables.waitArrivals.map((col) => col[v] ?? 0).find((a) => a > 0) ?? 0;
        if (arrivals !== 1) {
          throw new EmitError(
            "bad-schedule",
            `rank ${r.rank}: visit ${v} waits for ${arrivals} arrivals; copy-engine chunk slots are written once per launch (arrivals 1)`,
          );
        }
        return arrivals;
      }),
    );
  const nvshmem = o.backend === "nvshmem";
  const planSlots = Math.max(1, ...signals.slots.map((e) => e.slots.length));
  // Under NVSHMEM a chunk's slot s is the low half of the 64-bit signal word at int32 slot 2s.
  const slots = nvshmem ? nvshmemSlotCount(planSlots) : planSlots;
  const transfers = nvshmem ? nvshmemTransfers(plan, signals, world, tensor.name, o, slots) : undefined;
  const hostOps = transfers === undefined ? planHostOps(plan, signals) : [];
  const buffers: Buffer[] = [
    { name: tensor.name, shape: [M, K], dtype: o.dtype, symmetric: true, init: "random" },
    { name: "gemm_b", shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: "gemm_c", shape: [M, N], dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(slots, !nvshmem),
  ];
  checkDistinctBuffers(buffers);
  const tables: Table[] = [
    { name: "mblock_order", dtype: "int32", values: perRank.map((t) => t.order) },
    {
      name: "mblock_wait_slot",
      dtype: "int32",
      values: perRank.map((t) => (nvshmem ? t.slot.map((x) => (x < 0 ? x : nvshmemSlot(x))) : t.slot)),
    },
    ...(transfers === undefined ? [] : [transfers.table]),
  ];
  const kernel = kernelEntry(AG_GEMM_CONSUMER, {
    name: "ag_gemm_consumer",
    stream: "compute",
    // Beside the NVSHMEM kernel the persistent GEMM leaves it its SMs (a GEMM program spinning on a chunk must not hold them).
    grid: [{ kind: "num-sms", cap: numTiles, ...(nvshmem ? { reserve: o.commSms } : {}) }],
    ...gemmLaunch(o, params),
    args: {
      a_ptr: { kind: "buffer", name: tensor.name },
      b_ptr: { kind: "buffer", name: "gemm_b" },
      c_ptr: { kind: "buffer", name: "gemm_c" },
      order_ptr: { kind: "table", name: "mblock_order" },
      slot_ptr: { kind: "table", name: "mblock_wait_slot" },
      sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      err_ptr: { kind: "error-buffer" },
      M: { kind: "int", value: M },
      N: { kind: "int", value: N },
      K: { kind: "int", value: K },
      rank: { kind: "rank" },
      target: { kind: "epoch-target", arrivals: 1 },
      timeout_ns: { kind: "timeout-ns" },
    },
    constexprs: { BLOCK_M: params.BLOCK_M, BLOCK_N: params.BLOCK_N, BLOCK_K: params.BLOCK_K, GROUP_M: params.GROUP_M },
    params: { ...params },
  });
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: options.name ?? "ag_gemm",
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots, bits: 32 },
    tables,
    kernels: transfers === undefined ? [kernel] : [kernel, transfers.kernel],
    hostOps,
    reference: agGemmReference(tensor.name, { M, N, K }, world, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  const files = [{ path: kernel.source, text: agGemmConsumerSource(params, { dtype: o.dtype }) }];
  return { files: transfers === undefined ? files : [...files, transfers.file], manifest };
}
