// The compute part of a TLX GEMM tile (`C[M,N] = A[M,K] @ B[K,N]`, TLX's Hopper
// warp-specialised GEMM): ring buffers of A and B stages in shared memory with full/empty
// mbarrier pairs, a producer issuing TMA loads, `replicate`d consumers issuing wgmma.
import { TARGETS } from "@ovl/primitives";
import { checkBlock, checkPositive } from "../triton/kernels/common.js";
import { TL_DTYPE, type ElementType } from "../../core/device/index.js";
import { EmitError, type PythonWriter } from "../../core/writer/index.js";
import type { TlxComputePart } from "./parts.js";

/** Tiling and pipelining of `tlxGemm`. */
export interface TlxGemmParams {
  readonly BLOCK_M: number;
  readonly BLOCK_N: number;
  readonly BLOCK_K: number;
  /** Ring depth: stages of A/B in shared memory (default `defaultStages`: the deepest ring up to 4 that fits). */
  readonly stages?: number;
  /** Consumer warp groups; each owns `BLOCK_M / consumers` rows of the tile (default 2). */
  readonly consumers?: number;
  /** Registers per consumer thread (default 232; lower it when a communication task runs). */
  readonly consumerRegisters?: number;
  /** Element type (bf16 or fp16: wgmma operands of 2 bytes). */
  readonly dtype?: ElementType;
  /**
   * Column slices each consumer's epilogue stores (1, 2 or 4; default 2). 2: one after the
   * other through one staging slice, which halves the staging tile and leaves shared memory
   * for a fourth ring stage at 128×256×64. 4: quarter-width slices through two staging
   * slices in turn (the same shared memory as 2), each slice's reuse waiting only for the
   * store two back, so no store waits for the one just issued to leave shared memory.
   */
  readonly epilogueSplit?: number;
  /**
   * CTAs per cluster along M (1 or 2; default 1). 2: the CTAs of a pair take the tiles of two
   * m-blocks of one n-block at a time and share its B blocks by TMA multicast — each loads half
   * of every B block into both CTAs' rings — so every B block crosses from L2 once per pair
   * instead of once per CTA (a 2×1 cluster, as cuBLAS's fastest Hopper GEMMs run). A stage is
   * free again once the consumers of both CTAs have read it: each consumer releases its own
   * CTA's stage and its peer's. Needs `BLOCK_N ≥ 128` (halves of whole 64-column swizzle
   * atoms), a schedule walking tiles in pairs (`groupedTiles({ clusterM: 2 })`) and an even
   * number of m-blocks.
   */
  readonly clusterM?: number;
}

/** CTAs per cluster along M a `tlxGemm` takes (`clusterM`). */
export type ClusterM = 1 | 2;

/**
 * `clusterM` checked: 1 or 2, and (given `BLOCK_N`) 2 only where `BLOCK_N` halves into whole
 * 64-column swizzle atoms.
 * @throws {EmitError} `bad-param`.
 */
export function checkClusterM(clusterM: number, BLOCK_N?: number): ClusterM {
  if (clusterM !== 1 && clusterM !== 2) throw new EmitError("bad-param", `clusterM must be 1 or 2, got ${String(clusterM)}`);
  if (clusterM === 2 && BLOCK_N !== undefined && BLOCK_N < 128)
    throw new EmitError("bad-param", `clusterM 2 multicasts halves of B blocks: BLOCK_N must be at least 128, got ${BLOCK_N}`);
  return clusterM;
}

/**
 * Whether a cluster of `clusterM` CTAs along M fits a GEMM of `numPidM` m-blocks visited in groups
 * of `groupM` rows: the CTAs of a cluster take consecutive visit rows, so both counts must be
 * multiples of the cluster (`checkClusterPairs` and `groupedTiles` refuse the others).
 */
export function clusterFits(clusterM: number, numPidM: number, groupM: number): boolean {
  return numPidM % clusterM === 0 && groupM % clusterM === 0;
}

/**
 * Refuses a cluster of `clusterM` CTAs along M over `numPidM` m-blocks that do not pair up.
 * @throws {EmitError} `bad-param`.
 */
export function checkClusterPairs(clusterM: number, numPidM: number): void {
  if (!clusterFits(clusterM, numPidM, clusterM))
    throw new EmitError(
      "bad-param",
      `clusterM ${clusterM} pairs m-blocks, but there are ${numPidM}: use clusterM 1, or an M that is a multiple of ${clusterM} × BLOCK_M`,
    );
}

/**
 * Shared memory a `tlxGemm` takes, in bytes: the A and B stages of the ring plus the
 * staging of the TMA-store epilogue (`epilogueStagingElements`); barriers add a few hundred
 * bytes (fbtriton 3.7.4 reports 213152 B at 128×256×64, 3 stages, one slice; 229544 B with
 * 4 stages and two; 229688 B with 4 stages and four).
 */
export function tlxGemmSharedBytes(p: TlxGemmParams): number {
  return (p.stages ?? defaultStages(p)) * ringStageBytes(p) + epilogueStagingElements(p.BLOCK_M, p.BLOCK_N, p.epilogueSplit ?? 2) * 2;
}

/**
 * Staging elements of the epilogue of `rows` × `cols` accumulator rows (all consumers'):
 * one slice of `cols / split` columns per row, two where the slices take turns (`split` 4).
 */
export function epilogueStagingElements(rows: number, cols: number, split: number): number {
  return rows * (cols / split) * (split === 4 ? 2 : 1);
}

/** The most stages a cooperative GEMM's ring takes by default. */
export const MAX_DEFAULT_STAGES = 4;

/**
 * The ring depth of a `tlxGemm` that names none: the deepest ring of at most
 * `MAX_DEFAULT_STAGES` stages that fits shared memory beside the epilogue's staging (4 at
 * 128×256×64 with the split epilogue, which gained over 3 on an H100 and an H200:
 * evidence: `results/runs/epilogue-split-2026-11-27`); 1 when none fits (then refused).
 */
export function defaultStages(p: Omit<TlxGemmParams, "stages">): number {
  for (let s = MAX_DEFAULT_STAGES; s > 1; s--) if (tlxGemmSharedBytes({ ...p, stages: s }) <= SM90_MAX_SHARED_BYTES) return s;
  return 1;
}

/** Epilogue column splits the consumers take (`epilogueSplit`). */
export type EpilogueSplit = 1 | 2 | 4;

/**
 * `epilogueSplit` checked: 1 or 2, and 4 where `quarters` (the cooperative consumers'
 * double-buffered staging). @throws {EmitError} `bad-param`.
 */
export function checkEpilogueSplit(split: number, quarters = false): EpilogueSplit {
  if (split === 1 || split === 2 || (quarters && split === 4)) return split;
  throw new EmitError("bad-param", `epilogueSplit must be 1 or 2${quarters ? " or 4" : ""}, got ${String(split)}`);
}

/**
 * A consumer's epilogue stores of its `rows` × BLOCK_N accumulator at rows `offsM`: one TMA
 * store, or (`split` 2) the left and right `EPI_N`-column halves one after the other, which
 * Triton stages through one shared slice (each store waits until the last has read it), or
 * (`split` 4) the four `EPI_N`-column quarters through this consumer's two slices of
 * `c_stage` in turn: before a slice is written, every store but the newest has left shared
 * memory (the one two back, which used the slice), then a proxy fence and the TMA store.
 */
export function writeEpilogueStores(w: PythonWriter, rows: string, offsM: string, split: EpilogueSplit, tl: string): void {
  if (split === 1) {
    w.line(`c_desc.store([${offsM}, offs_bn], acc.to(${tl}))`);
    return;
  }
  if (split === 2) {
    w.line(`halves = tl.permute(tl.reshape(acc, (${rows}, 2, EPI_N)), (0, 2, 1))`);
    w.line("acc0, acc1 = tl.split(halves)");
    w.line(`c_desc.store([${offsM}, offs_bn], acc0.to(${tl}))`);
    w.line(`c_desc.store([${offsM}, offs_bn + EPI_N], acc1.to(${tl}))`);
    return;
  }
  w.line(`acc0, acc1 = tl.split(tl.permute(tl.reshape(acc, (${rows}, 2, 2 * EPI_N)), (0, 2, 1)))`);
  w.line(`q0, q1 = tl.split(tl.permute(tl.reshape(acc0, (${rows}, 2, EPI_N)), (0, 2, 1)))`);
  w.line(`q2, q3 = tl.split(tl.permute(tl.reshape(acc1, (${rows}, 2, EPI_N)), (0, 2, 1)))`);
  for (let q = 0; q < 4; q++) {
    const slice = `tlx.local_view(c_stage, cid * 2 + ${q % 2})`;
    w.line("tlx.async_descriptor_store_wait(1)");
    w.line(`tlx.local_store(${slice}, q${q}.to(${tl}))`);
    w.line("tlx.fence_async_shared()");
    w.line(`tlx.async_descriptor_store(c_desc, ${slice}, [${offsM}, offs_bn + ${q} * EPI_N])`);
  }
}

/** `num_pid_m`, `num_pid_n`, `num_tiles` and `k_tiles` of the GEMM (every compute part's setup ends with them). */
export function writeTileCounts(w: PythonWriter): void {
  w.line("num_pid_m = tl.cdiv(M, BLOCK_M)");
  w.line("num_pid_n = tl.cdiv(N, BLOCK_N)");
  w.line("num_tiles = num_pid_m * num_pid_n");
  w.line("k_tiles = tl.cdiv(K, BLOCK_K)");
}

/**
 * The producer's k-loop over a tile (ring position `it`, advanced here): per k-step, wait
 * until the stage is empty (the opposite phase, so the first pass does not block), expect
 * its bytes on its `full` barrier, issue the A loads (`writeALoads`, given `stage`, `ki`,
 * `full`) and the B load into it.
 */
export function writeRingLoads(w: PythonWriter, stageBytes: number, writeALoads: (k: PythonWriter) => void, clusterM: ClusterM = 1): void {
  w.line("offs_bn = pid_n * BLOCK_N");
  w.block("for ki in range(k_tiles)", (k) => {
    k.line("stage = it % NUM_STAGES");
    k.line("tlx.barrier_wait(tlx.local_view(empty_bars, stage), ((it // NUM_STAGES) & 1) ^ 1)");
    k.line("full = tlx.local_view(full_bars, stage)");
    // With multicast the peer's half of B lands on this barrier too: the stage's bytes are the same.
    k.line(`tlx.barrier_expect_bytes(full, ${stageBytes})`);
    writeALoads(k);
    if (clusterM === 1) k.line("tlx.async_descriptor_load(b_desc, tlx.local_view(b_ring, stage), [ki * BLOCK_K, offs_bn], full)");
    else writeMulticastBLoads(k);
    k.line("it += 1");
  });
}

/**
 * This CTA's half of the stage's B block, multicast into both CTAs' rings (slice offsets are
 * constants, so one branch per half).
 */
function writeMulticastBLoads(k: PythonWriter): void {
  const half = (h: number) =>
    `tlx.async_descriptor_load(b_desc, tlx.local_slice(tlx.local_view(b_ring, stage), [0, ${h === 0 ? "0" : "HALF_N"}], [BLOCK_K, HALF_N]), [ki * BLOCK_K, offs_bn${h === 0 ? "" : " + HALF_N"}], full, multicast_targets=[0, 1])`;
  k.block("if cta == 0", (b) => b.line(half(0)));
  k.block("else", (b) => b.line(half(1)));
}

/**
 * The producer's drain after its tile loop (clusters only): wait until the consumers of both
 * CTAs have released every stage, so no release from the peer is still on its way to this
 * CTA's barriers when it exits.
 */
export function writeClusterDrain(w: PythonWriter): void {
  w.comment("Every stage released by both CTAs' consumers: no arrive from the peer is still on its way here.");
  w.block("for _ in range(NUM_STAGES)", (d) => {
    d.line("stage = it % NUM_STAGES");
    d.line("tlx.barrier_wait(tlx.local_view(empty_bars, stage), ((it // NUM_STAGES) & 1) ^ 1)");
    d.line("it += 1");
  });
}

/** Releases ring stage `stage` (an expression): this CTA's `empty` barrier, and the peer's with a cluster. */
export function writeStageRelease(w: PythonWriter, stage: string, clusterM: ClusterM = 1): void {
  w.line(`tlx.barrier_arrive(tlx.local_view(empty_bars, ${stage}))`);
  if (clusterM === 2) w.line(`tlx.barrier_arrive(tlx.local_view(empty_bars, ${stage}), 1, remote_cta_rank=peer)`);
}

/**
 * A consumer's wgmma chain over a tile into `acc`, A from ring slot `aSlot` (an expression
 * over `stage`): per k-step wait for the stage to be full, issue the wgmma, keep one in
 * flight and free the stage before it. Leaves the last wgmma in flight and its stage in `prev`.
 */
export function writeRingMmas(w: PythonWriter, aSlot: string, clusterM: ClusterM = 1): void {
  w.line("prev = 0");
  w.block("for ki in range(k_tiles)", (k) => {
    k.line("stage = it % NUM_STAGES");
    k.line("tlx.barrier_wait(tlx.local_view(full_bars, stage), (it // NUM_STAGES) & 1)");
    k.line(`acc = tlx.async_dot(tlx.local_view(a_ring, ${aSlot}), tlx.local_view(b_ring, stage), acc)`);
    k.comment("Keep one wgmma in flight; the one before it is done, so its stage is free.");
    k.line("acc = tlx.async_dot_wait(1, acc)");
    k.block("if ki > 0", (i) => writeStageRelease(i, "prev", clusterM));
    k.line("prev = stage");
    k.line("it += 1");
  });
}

/** Named barrier the consumers of a tile sync on after its stores (ping-pong: this and the next id, one per consumer). */
export const EPILOGUE_BARRIER = 11;

/** Shared memory an sm_90 CTA may use (227 KiB). */
export const SM90_MAX_SHARED_BYTES = TARGETS.h100.sharedBytesPerBlock;

/** Bytes of one ring stage: an A block and a B block of 16-bit elements. */
export function ringStageBytes(p: { readonly BLOCK_M: number; readonly BLOCK_N: number; readonly BLOCK_K: number }): number {
  return (p.BLOCK_M * p.BLOCK_K + p.BLOCK_K * p.BLOCK_N) * 2;
}

/**
 * Refuses a ring of `stages` blocks plus the epilogue tile (`smem` bytes in all) over `limit`.
 * @throws {EmitError} `bad-param`.
 */
export function checkRingFits(
  p: { readonly BLOCK_M: number; readonly BLOCK_N: number; readonly BLOCK_K: number },
  stages: number,
  smem: number,
  limit: number,
): void {
  if (smem > limit) {
    throw new EmitError(
      "bad-param",
      `${stages} stages of ${p.BLOCK_M}x${p.BLOCK_K} + ${p.BLOCK_K}x${p.BLOCK_N} and the epilogue tile take ${smem} B of shared memory (> ${limit}); use fewer stages or smaller blocks`,
    );
  }
}

/**
 * The GEMM compute part. Setup: descriptors of A (`[BLOCK_M / consumers, BLOCK_K]` blocks),
 * B and C, rings `a_ring` (stages × consumers) and `b_ring` (stages), and per stage a
 * `full` barrier (arrive count 1: the producer's expect-bytes; TMA completes the phase)
 * and an `empty` barrier (arrive count = consumers). Ring position `it` counts k-steps
 * over the whole persistent loop: stage `it % stages`, phase `(it // stages) & 1`; the
 * producer waits `empty` on the opposite phase, so the first pass does not block.
 * Consumers keep one wgmma in flight (`async_dot_wait(1)`) and free the previous stage.
 * With `clusterM` 2 (a 2×1 cluster): each CTA loads half of every B block with multicast
 * into both CTAs' rings (the `full` barrier expects the whole stage either way), `empty`
 * counts the consumers of both CTAs (each releases its own CTA's stage and its peer's), and
 * the producer drains the ring before it exits (`writeClusterDrain`).
 * @throws {EmitError} `bad-param` for blocks that are not powers of two, BLOCK_M not
 *   split into 64-row warp-group slices, fp32, rings beyond shared memory, or a cluster
 *   `checkClusterM` refuses.
 */
export function tlxGemm(params: TlxGemmParams): TlxComputePart {
  const dtype = params.dtype ?? "bf16";
  if (dtype !== "bf16" && dtype !== "fp16")
    throw new EmitError("bad-param", `the TLX GEMM takes bf16 or fp16 operands (wgmma), got ${String(dtype)}`);
  const BLOCK_M = checkBlock(params.BLOCK_M, "BLOCK_M", 64, 256);
  const BLOCK_N = checkBlock(params.BLOCK_N, "BLOCK_N", 16, 256);
  const BLOCK_K = checkBlock(params.BLOCK_K, "BLOCK_K", 16, 128);
  const stages = checkPositive(params.stages ?? defaultStages(params), "stages");
  const consumers = checkPositive(params.consumers ?? 2, "consumers");
  const split = checkEpilogueSplit(params.epilogueSplit ?? 2, true);
  const clusterM = checkClusterM(params.clusterM ?? 1, BLOCK_N);
  if (BLOCK_N / split < 8)
    throw new EmitError("bad-param", `epilogueSplit ${split} cuts BLOCK_N (${BLOCK_N}) into slices under 8 columns (16-byte TMA rows)`);
  if (BLOCK_M % consumers !== 0 || (BLOCK_M / consumers) % 64 !== 0) {
    throw new EmitError(
      "bad-param",
      `BLOCK_M (${BLOCK_M}) must split into ${consumers} consumer slices of a multiple of 64 rows (one wgmma M per warp group)`,
    );
  }
  checkRingFits(
    { BLOCK_M, BLOCK_N, BLOCK_K },
    stages,
    tlxGemmSharedBytes({ ...params, stages, epilogueSplit: split }),
    SM90_MAX_SHARED_BYTES,
  );
  const tl = TL_DTYPE[dtype];
  const stageBytes = ringStageBytes({ BLOCK_M, BLOCK_N, BLOCK_K });
  return {
    name: "tlx-gemm",
    args: ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"],
    constexprs: {
      BLOCK_M,
      BLOCK_N,
      BLOCK_K,
      NUM_STAGES: stages,
      NUM_CONSUMERS: consumers,
      EPILOGUE_SPLIT: split,
      ...(clusterM === 1 ? {} : { CLUSTER_M: clusterM }),
    },
    expect: [
      "wgmma\\.mma_async",
      "mbarrier\\.try_wait",
      "cp\\.async\\.bulk\\.tensor",
      "setmaxnreg",
      ...(clusterM === 1 ? [] : ["\\.multicast::cluster", "mbarrier\\.arrive\\.shared::cluster"]),
    ],
    consumers,
    clusterM,
    consumerRegisters: params.consumerRegisters ?? 232,
    accumulatorRegisters: ((BLOCK_M / consumers) * BLOCK_N) / 128,
    // Every consumer stores a slice of each tile (EPILOGUE_SPLIT TMA stores): all of them sync, consumer 0 speaks for it.
    epilogueSync: { barrier: String(EPILOGUE_BARRIER), threads: 128 * consumers, leader: "cid == 0", storeGroups: split },
    dtype,
    writeSetup(w) {
      w.line("SPLIT_M: tl.constexpr = BLOCK_M // NUM_CONSUMERS");
      w.line("EPI_N: tl.constexpr = BLOCK_N // EPILOGUE_SPLIT");
      w.line("a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[SPLIT_M, BLOCK_K])");
      if (clusterM === 1) {
        w.line("b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])");
      } else {
        w.line("HALF_N: tl.constexpr = BLOCK_N // 2");
        w.line("b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, HALF_N])");
      }
      w.line("c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, EPI_N])");
      w.line(`a_ring = tlx.local_alloc((SPLIT_M, BLOCK_K), ${tl}, NUM_STAGES * NUM_CONSUMERS)`);
      w.line(`b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), ${tl}, NUM_STAGES)`);
      if (split === 4) w.line(`c_stage = tlx.local_alloc((SPLIT_M, EPI_N), ${tl}, 2 * NUM_CONSUMERS)`);
      w.line("full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)");
      if (clusterM === 1) {
        w.line("empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_CONSUMERS)");
      } else {
        w.comment("A stage is written by both CTAs of the pair (B by multicast): the consumers of both release it.");
        w.line("empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_CONSUMERS * CLUSTER_M)");
        w.line("cta = tlx.cluster_cta_rank()");
        w.line("peer = cta ^ 1");
      }
      writeTileCounts(w);
    },
    writeProducerTile(w) {
      writeRingLoads(
        w,
        stageBytes,
        (k) =>
          k.block("for c in tl.static_range(NUM_CONSUMERS)", (c) => {
            c.line(
              "tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, stage * NUM_CONSUMERS + c), [offs_am + c * SPLIT_M, ki * BLOCK_K], full)",
            );
          }),
        clusterM,
      );
    },
    ...(clusterM === 1 ? {} : { writeProducerExit: writeClusterDrain }),
    writeConsumerTile(w, afterStores) {
      w.line("offs_bn = pid_n * BLOCK_N");
      w.line("acc = tl.zeros((SPLIT_M, BLOCK_N), dtype=tl.float32)");
      writeRingMmas(w, "stage * NUM_CONSUMERS + cid", clusterM);
      w.line("acc = tlx.async_dot_wait(0, acc)");
      writeStageRelease(w, "prev", clusterM);
      w.comment("Epilogue: this consumer's rows of the tile, by EPILOGUE_SPLIT TMA stores.");
      writeEpilogueStores(w, "SPLIT_M", "offs_am + cid * SPLIT_M", split, tl);
      afterStores?.(w);
    },
    ...(split === 4
      ? {
          writeConsumerExit(w: PythonWriter) {
            w.comment("The last stores leave shared memory before the consumer exits.");
            w.line("tlx.async_descriptor_store_wait(0)");
          },
        }
      : {}),
  };
}
