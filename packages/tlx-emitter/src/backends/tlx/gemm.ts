// TLX emitters: the same plans and tile schedules as the plain-Triton path, emitted as
// warp-specialised kernels marked `precompiled` (compiled ahead of time for sm_90a by
// scripts/tlx-aot-compile.py, launched from the cubin by the runner); the plain GEMM also
// for sm_100a (tcgen05 / TMEM, optionally cluster launch control), compiled but not run.
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import { checkPositive } from "../triton/kernels/common.js";
import { alignmentUnit, checkSegmentAlignment } from "../triton/kernels/sm-comm.js";
import type { KernelTemplateInfo } from "../triton/kernels/index.js";
import type { ElementType } from "../../core/device/index.js";
import {
  type Buffer,
  type Kernel,
  type KernelArg,
  type Manifest,
  MANIFEST_SCHEMA,
  type Table,
  type TileProgramSpec,
} from "../../core/manifest/schema.js";
import { agGemmReference, checkDistinctBuffers, checkPlanAndSchedule, kernelEntry, signalBuffer, SIGNAL_BUFFER } from "../triton/common.js";
import type { EmittedFile } from "../../core/result.js";
import { planHostOps } from "../../schedule/host-ops.js";
import { mBlockTables } from "../../schedule/m-block-tables.js";
import { type EmitOptions, resolveOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import { RANK_VAR, tablesOf } from "../../schedule/maps.js";
import { EmitError } from "../../core/writer/index.js";
import { chunkWaitComm, noComm, pushCommTask, PUSH_ROW_FIELDS } from "./comm.js";
import { checkClusterM, checkClusterPairs, tlxGemm } from "./compute.js";
import { tlxGemmPingPong } from "./compute-pingpong.js";
import { tlxBlackwellKernel, tlxGemmBlackwell } from "./compute-blackwell.js";
import type { TlxNotifier } from "../../core/operator.js";
import { type TlxComputePart, tlxKernel, type TlxKernel } from "./parts.js";
import { pushRows } from "./push-rows.js";
import { mblockKernelArgs, mblockMap } from "./mblock-map.js";
import { clcTiles, groupedTiles } from "./tile-order.js";

/** Compile targets of TLX kernels. */
export type TlxTarget = "sm_90a" | "sm_100a";

/** Options of the TLX emitters (the plain path's options, plus the warp-specialised knobs). */
export interface TlxEmitOptions extends Omit<EmitOptions, "backend" | "numWarps" | "numStages"> {
  /**
   * Compile target (default `sm_90a`). `sm_100a` (plain GEMM only) emits the Blackwell
   * kernel: tcgen05 MMAs into TMEM accumulators; it is compiled, not run.
   */
  readonly target?: TlxTarget;
  /** Ring depth (default on sm_90a: the deepest ring up to 4 that fits, `defaultStages`; default 4 on sm_100a). */
  readonly stages?: number;
  /** Consumer warp groups (default 2). */
  readonly consumers?: number;
  /** Registers per consumer thread (default 232, 208 with a communication task). */
  readonly consumerRegisters?: number;
  /**
   * sm_90a plain GEMM: how the two consumer warp groups share tiles — `cooperative`
   * (default: each takes `BLOCK_M / 2` rows of every tile) or `pingpong` (each takes
   * whole tiles in turn; one's epilogue overlaps the other's wgmma chain; `tlxGemmPingPong`).
   */
  readonly consumerSchedule?: "cooperative" | "pingpong";
  /** Column slices of each consumer's epilogue TMA stores, one staging slice between them (1 or 2; default 2). */
  readonly epilogueSplit?: number;
  /**
   * sm_90a cooperative consumers: CTAs per cluster along M (1 or 2; default 1). 2: pairs of
   * CTAs take two m-blocks of one n-block at a time and share its B blocks by TMA multicast
   * (`TlxGemmParams.clusterM`); the number of m-blocks must be even.
   */
  readonly clusterM?: number;
  /**
   * GEMM+RS: who issues a tile's tile-done notify — `consumers` (default: the warp groups that
   * stored it, deferred by a tile, a release add), `producer` (the TMA producer warp group, a few
   * tiles later, told through mbarriers that the stores are complete: `producerTileNotifyComm`),
   * so no consumer stalls on a release, or `tma` (the consumers, deferred by a tile, by a TMA
   * reduce-add once the tile's stores are written: `tmaTileNotifyComm`), so no thread executes a fence.
   */
  readonly notifier?: TlxNotifier;
  /** AG+GEMM transport: `copy-engine` host copies (variant a) or `comm-task` device pushes (variant b). */
  readonly comm?: "copy-engine" | "comm-task";
  /** Pieces each chunk is cut into for the communication task (default 4). */
  readonly commPieces?: number;
  /** Elements the communication task moves per step (default 2048). */
  readonly commBlock?: number;
  /** sm_100a: TMEM accumulators (default 2). */
  readonly accBuffers?: number;
  /** sm_100a: columns the epilogue moves per TMEM load and TMA store (default min(BN, 64)). */
  readonly epilogueN?: number;
  /** sm_100a: tile order, `persistent` (grouped, one program per SM; default) or `clc` (one program per tile, cluster launch control). */
  readonly scheduler?: "persistent" | "clc";
}

/** `notifier` is GEMM+RS's: refused elsewhere. */
function refuseNotifier(options: TlxEmitOptions, why: string): void {
  if (options.notifier !== undefined)
    throw new EmitError("bad-param", `option notifier applies to GEMM+ReduceScatter's producer only: ${why}`);
}

/** The target of `options`, with the options that do not apply to it refused. */
function targetOf(options: TlxEmitOptions): TlxTarget {
  const target = options.target ?? "sm_90a";
  if (target !== "sm_90a" && target !== "sm_100a")
    throw new EmitError("bad-param", `target must be "sm_90a" or "sm_100a", got ${String(target)}`);
  const misplaced = (
    target === "sm_100a"
      ? (["consumers", "consumerRegisters", "consumerSchedule", "epilogueSplit", "clusterM"] as const)
      : (["accBuffers", "epilogueN", "scheduler"] as const)
  ).filter((k) => options[k] !== undefined);
  if (misplaced.length > 0) throw new EmitError("bad-param", `option ${misplaced.join(", ")} does not apply to target ${target}`);
  const scheduler = options.scheduler ?? "persistent";
  if (scheduler !== "persistent" && scheduler !== "clc")
    throw new EmitError("bad-param", `scheduler must be "persistent" or "clc", got ${String(scheduler)}`);
  return target;
}

/** What a TLX emitter returns: kernel sources, the manifest, and each kernel's PTX expectations for the AOT check. */
export interface TlxEmitResult {
  readonly files: EmittedFile[];
  readonly manifest: Manifest;
  /** Per kernel name, the PTX patterns its compiled code must contain. */
  readonly expect: Readonly<Record<string, readonly string[]>>;
}

/** The manifest entry of an assembled kernel, marked precompiled for `target`. */
export function tlxEntry(
  kernel: TlxKernel,
  name: string,
  grid: Kernel["grid"],
  args: Readonly<Record<string, KernelArg>>,
  params: Record<string, number | string | boolean>,
  target: TlxTarget = "sm_90a",
  tileProgram?: TileProgramSpec,
): Kernel {
  const info: KernelTemplateInfo = kernel.info;
  const k = kernelEntry(info, {
    name,
    stream: "compute",
    grid,
    numWarps: kernel.numWarps,
    numStages: 1,
    args,
    constexprs: kernel.constexprs,
    params,
  });
  return {
    ...k,
    precompiled: {
      target,
      cubin: `${name}.${target}.cubin`,
      metadata: `${name}.${target}.json`,
      ...(kernel.cluster === undefined ? {} : { cluster: [...kernel.cluster] }),
    },
    ...(tileProgram === undefined ? {} : { tileProgram }),
  };
}

function gemmArgs(a: string, M: number, N: number, K: number): Record<string, KernelArg> {
  return {
    a_ptr: { kind: "buffer", name: a },
    b_ptr: { kind: "buffer", name: "gemm_b" },
    c_ptr: { kind: "buffer", name: "gemm_c" },
    M: { kind: "int", value: M },
    N: { kind: "int", value: N },
    K: { kind: "int", value: K },
  };
}

/**
 * The plain TLX GEMM `C = A @ B` (no communication; the 8192³ benchmark against cuBLAS).
 * Its manifest is a one-rank `ag-gemm` (gathering one shard is the identity), so the
 * runner checks it against `A @ B` like every other manifest. With `target: "sm_100a"`
 * the kernel is the Blackwell one (`tlxGemmBlackwell`: TMA loads, tcgen05 MMAs into TMEM,
 * TMEM-to-TMA-store epilogue), same kind `tlx-gemm`, arguments and semantics; with
 * `scheduler: "clc"` it is launched one program per tile and walks tiles by cluster
 * launch control (`clcTiles`).
 * @throws {EmitError} `bad-param` for tilings the TLX GEMM refuses, and options that do
 *   not apply to the target.
 */
export function emitTlxGemm(
  problem: { readonly M: number; readonly N: number; readonly K: number },
  tile: { readonly BM: number; readonly BN: number; readonly BK: number } = { BM: 128, BN: 256, BK: 64 },
  options: TlxEmitOptions = {},
): TlxEmitResult {
  const o = resolveOptions(options);
  refuseNotifier(options, "the plain TLX GEMM notifies nothing");
  const M = checkPositive(problem.M, "M");
  const N = checkPositive(problem.N, "N");
  const K = checkPositive(problem.K, "K");
  if (K % 8 !== 0 || N % 8 !== 0) throw new EmitError("bad-param", `TMA needs 16-byte rows: K (${K}) and N (${N}) must be multiples of 8`);
  const target = targetOf(options);
  const groupM = options.groupM ?? 8;
  const clc = options.scheduler === "clc";
  const kernel =
    target === "sm_100a"
      ? tlxBlackwellKernel({
          kind: "tlx-gemm",
          entry: "tlx_gemm",
          summary: `tlx-gemm: C = A @ B for sm_100a, warp-specialised (TMA loads, tcgen05 MMAs into TMEM, TMEM epilogue${clc ? ", tiles by cluster launch control" : ""}).`,
          compute: tlxGemmBlackwell({
            BLOCK_M: tile.BM,
            BLOCK_N: tile.BN,
            BLOCK_K: tile.BK,
            dtype: o.dtype,
            ...(options.stages === undefined ? {} : { stages: options.stages }),
            ...(options.accBuffers === undefined ? {} : { accBuffers: options.accBuffers }),
            ...(options.epilogueN === undefined ? {} : { epilogueN: options.epilogueN }),
          }),
          schedule: clc ? clcTiles({ groupM }) : groupedTiles({ groupM }),
        })
      : tlxKernel({
          kind: "tlx-gemm",
          entry: "tlx_gemm",
          summary: "tlx-gemm: C = A @ B, warp-specialised (TMA producer, replicated wgmma consumers).",
          compute: hopperGemmPart(tile, o.dtype, options),
          comm: noComm(),
          schedule: groupedTiles({ groupM, clusterM: clusterOf(options, Math.ceil(M / tile.BM)) }),
        });
  const name = options.name ?? "tlx_gemm";
  const numTiles = Math.ceil(M / tile.BM) * Math.ceil(N / tile.BN);
  // Cluster launch control launches one program per tile; the others are persistent.
  const grid: Kernel["grid"] = clc ? [numTiles] : [{ kind: "num-sms", cap: numTiles }];
  const params = { M, N, K, ...tileParams(tile), ...(target === "sm_100a" ? { scheduler: clc ? "clc" : "persistent" } : {}) };
  const entry = tlxEntry(kernel, "tlx_gemm", grid, gemmArgs("gemm_a", M, N, K), params, target);
  const buffers: Buffer[] = [
    { name: "gemm_a", shape: [M, K], dtype: o.dtype, symmetric: false, init: "random" },
    { name: "gemm_b", shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: "gemm_c", shape: [M, N], dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(1, false),
  ];
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name,
    world: 1,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: 1, bits: 32 },
    tables: [],
    kernels: [entry],
    hostOps: [],
    reference: {
      operator: "ag-gemm",
      M,
      N,
      K,
      inputs: { A: "gemm_a", B: "gemm_b" },
      output: "gemm_c",
      rowsPerRank: M,
      tolerance: o.tolerance,
    },
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  return { files: [{ path: entry.source, text: kernel.source }], manifest, expect: { [entry.name]: kernel.expect } };
}

/**
 * `options.clusterM` (default 1), checked against `numPidM` m-blocks (a pair per cluster).
 * @throws {EmitError} `bad-param` for a cluster other than 1 or 2, or m-blocks that do not pair up.
 */
export function clusterOf(options: TlxEmitOptions, numPidM: number): number {
  const clusterM = checkClusterM(options.clusterM ?? 1);
  checkClusterPairs(clusterM, numPidM);
  return clusterM;
}

/** The sm_90a GEMM compute part `options.consumerSchedule` names. */
export function hopperGemmPart(tile: { BM: number; BN: number; BK: number }, dtype: ElementType, options: TlxEmitOptions): TlxComputePart {
  const schedule = options.consumerSchedule ?? "cooperative";
  const blocks = { BLOCK_M: tile.BM, BLOCK_N: tile.BN, BLOCK_K: tile.BK, dtype };
  if (schedule === "cooperative")
    return tlxGemm({ ...blocks, ...stagesOf(options), ...(options.clusterM === undefined ? {} : { clusterM: options.clusterM }) });
  if (schedule !== "pingpong")
    throw new EmitError("bad-param", `consumerSchedule must be "cooperative" or "pingpong", got ${String(schedule)}`);
  if ((options.clusterM ?? 1) !== 1)
    throw new EmitError(
      "bad-param",
      `clusterM ${String(options.clusterM)} applies to cooperative consumers only; ping-pong runs clusterM 1`,
    );
  if (options.consumers !== undefined && options.consumers !== 2)
    throw new EmitError("bad-param", `ping-pong takes exactly 2 consumer warp groups, got ${options.consumers}`);
  return tlxGemmPingPong({
    ...blocks,
    ...(options.stages === undefined ? {} : { stages: options.stages }),
    ...(options.consumerRegisters === undefined ? {} : { consumerRegisters: options.consumerRegisters }),
    ...(options.epilogueSplit === undefined ? {} : { epilogueSplit: options.epilogueSplit }),
  });
}

function stagesOf(o: TlxEmitOptions): { stages?: number; consumers?: number; consumerRegisters?: number; epilogueSplit?: number } {
  return {
    ...(o.stages === undefined ? {} : { stages: o.stages }),
    ...(o.consumers === undefined ? {} : { consumers: o.consumers }),
    ...(o.consumerRegisters === undefined ? {} : { consumerRegisters: o.consumerRegisters }),
    ...(o.epilogueSplit === undefined ? {} : { epilogueSplit: o.epilogueSplit }),
  };
}

function tileParams(t: { BM: number; BN: number; BK: number }): Record<string, number> {
  return { BLOCK_M: t.BM, BLOCK_N: t.BN, BLOCK_K: t.BK };
}

/**
 * TLX AllGather+GEMM from an AllGather plan over the rows of `A` and its consumer tile
 * schedule (the inputs of `emitAgGemm`). The kernel visits m-blocks in the schedule's
 * order (`mblock_order`); its producer waits on the chunk slot of the rows it is about
 * to load (`mblock_wait_slot`, -1 = local rows). Transport (`options.comm`):
 * - `copy-engine` (variant a): the plan's copies as host ops with stream-written signals,
 *   exactly as the plain path; the wait target is epoch × 1.
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
    comm: pushes === undefined ? [chunkWaitComm(slot.map)] : [chunkWaitComm(slot.map), pushCommTask({ block: options.commBlock ?? 2048 })],
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
    target: { kind: "epoch-target", arrivals: pushes?.arrivals ?? 1 },
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
