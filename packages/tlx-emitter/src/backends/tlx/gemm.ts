import { checkPositive } from "../triton/kernels/common.js";
import type { KernelTemplateInfo } from "../triton/kernels/index.js";
import type { ElementType } from "../../core/device/index.js";
import {
  type Buffer,
  type Kernel,
  type KernelArg,
  type Manifest,
  MANIFEST_SCHEMA,
  type TileProgramSpec,
} from "../../core/manifest/schema.js";
import { kernelEntry, signalBuffer, SIGNAL_BUFFER } from "../triton/common.js";
import type { EmittedFile } from "../../core/result.js";
import { type EmitOptions, resolveOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import { EmitError } from "../../core/writer/index.js";
import { noComm } from "./comm.js";
import { checkClusterM, checkClusterPairs, tlxGemm } from "./compute.js";
import { tlxGemmPingPong } from "./compute-pingpong.js";
import { tlxBlackwellKernel, tlxGemmBlackwell } from "./compute-blackwell.js";
import type { TlxNotifier } from "../../core/operator.js";
import { type TlxComputePart, tlxKernel, type TlxKernel } from "./parts.js";
import { clcTiles, groupedTiles } from "./tile-order.js";
import { refuseFp8Template } from "../../core/dtype.js";

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
export function refuseNotifier(options: TlxEmitOptions, why: string): void {
  if (options.notifier !== undefined)
    throw new EmitError("bad-param", `option notifier applies to GEMM+ReduceScatter's producer only: ${why}`);
}

/** The target of `options`, with the options that do not apply to it refused. */
export function targetOf(options: TlxEmitOptions): TlxTarget {
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

export function gemmArgs(a: string, M: number, N: number, K: number): Record<string, KernelArg> {
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
  refuseFp8Template(o.dtype, "the TLX GEMM");
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

export function stagesOf(o: TlxEmitOptions): { stages?: number; consumers?: number; consumerRegisters?: number; epilogueSplit?: number } {
  return {
    ...(o.stages === undefined ? {} : { stages: o.stages }),
    ...(o.consumers === undefined ? {} : { consumers: o.consumers }),
    ...(o.consumerRegisters === undefined ? {} : { consumerRegisters: o.consumerRegisters }),
    ...(o.epilogueSplit === undefined ? {} : { epilogueSplit: o.epilogueSplit }),
  };
}

export function tileParams(t: { BM: number; BN: number; BK: number }): Record<string, number> {
  return { BLOCK_M: t.BM, BLOCK_N: t.BN, BLOCK_K: t.BK };
}
