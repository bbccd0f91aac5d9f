// The ping-pong compute part of a TLX GEMM (Hopper): two consumer warp groups take whole
// tiles in turn, so one runs its epilogue while the other's wgmma chain runs. The
// producer fills one ring in tile order; a pair of named barriers hands the tensor cores
// from one consumer to the other once its last wgmma of a tile is issued.
import { checkBlock, checkPositive } from "../triton/kernels/common.js";
import { TL_DTYPE } from "../../core/device/index.js";
import { EmitError } from "../../core/writer/index.js";
import {
  checkEpilogueSplit,
  checkRingFits,
  epilogueStagingElements,
  EPILOGUE_BARRIER,
  ringStageBytes,
  SM90_MAX_SHARED_BYTES,
  type TlxGemmParams,
  writeEpilogueStores,
  writeRingLoads,
  writeRingMmas,
  writeTileCounts,
} from "./compute.js";
import type { TlxComputePart } from "./parts.js";

/** Tiling of `tlxGemmPingPong`: each consumer owns a whole `BLOCK_M × BLOCK_N` tile (`epilogueSplit` as `tlxGemm`'s). */
export type TlxPingPongParams = Omit<TlxGemmParams, "consumers">;

/** Named barriers of the turn hand-over (ids 9 and 10; 0 is `bar.sync`'s, 8 the communication task's). */
export const PINGPONG_BARRIERS = [9, 10] as const;

/**
 * Shared memory a `tlxGemmPingPong` takes, in bytes: the ring plus one epilogue staging
 * slice per consumer (`BLOCK_M × BLOCK_N / epilogueSplit`, `epilogueStagingElements`).
 */
export function tlxPingPongSharedBytes(p: TlxPingPongParams): number {
  return (p.stages ?? 4) * ringStageBytes(p) + epilogueStagingElements(2 * p.BLOCK_M, p.BLOCK_N, p.epilogueSplit ?? 2) * 2;
}

/**
 * The ping-pong GEMM compute part. Tiles of one program alternate between consumer 0
 * (even turns) and consumer 1 (odd turns); the ring position `it` counts k-steps of every
 * tile, so a consumer skips `k_tiles` positions for each tile of the other. Before its
 * wgmma chain consumer `c` waits on named barrier `9 + c`; after issuing its last wgmma
 * it arrives on the other's, and consumer 1 arrives once up front so consumer 0 starts.
 * @throws {EmitError} `bad-param` for blocks that are not powers of two, an accumulator
 *   of more than 128 fp32 registers a thread, or rings beyond shared memory.
 */
export function tlxGemmPingPong(params: TlxPingPongParams): TlxComputePart {
  const dtype = params.dtype ?? "bf16";
  if (dtype !== "bf16" && dtype !== "fp16")
    throw new EmitError("bad-param", `the TLX GEMM takes bf16 or fp16 operands (wgmma), got ${String(dtype)}`);
  const BLOCK_M = checkBlock(params.BLOCK_M, "BLOCK_M", 64, 128);
  const BLOCK_N = checkBlock(params.BLOCK_N, "BLOCK_N", 16, 256);
  const BLOCK_K = checkBlock(params.BLOCK_K, "BLOCK_K", 16, 128);
  const stages = checkPositive(params.stages ?? 4, "stages");
  const split = checkEpilogueSplit(params.epilogueSplit ?? 2);
  const accumulatorRegisters = (BLOCK_M * BLOCK_N) / 128;
  if (accumulatorRegisters > 128) {
    throw new EmitError(
      "bad-param",
      `a ping-pong consumer holds a whole ${BLOCK_M}x${BLOCK_N} tile: ${accumulatorRegisters} fp32 registers a thread (> 128); use 128x128 or 64x256`,
    );
  }
  checkRingFits({ BLOCK_M, BLOCK_N, BLOCK_K }, stages, tlxPingPongSharedBytes({ ...params, stages }), SM90_MAX_SHARED_BYTES);
  const tl = TL_DTYPE[dtype];
  const stageBytes = ringStageBytes({ BLOCK_M, BLOCK_N, BLOCK_K });
  const [first, second] = PINGPONG_BARRIERS;
  return {
    name: "tlx-gemm-pingpong",
    args: ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"],
    constexprs: { BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES: stages, EPILOGUE_SPLIT: split },
    expect: ["wgmma\\.mma_async", "mbarrier\\.try_wait", "cp\\.async\\.bulk\\.tensor", "setmaxnreg", "bar\\.arrive"],
    consumers: 2,
    consumerRegisters: params.consumerRegisters ?? 232,
    accumulatorRegisters,
    // A tile is one consumer's alone: its own barrier (the other may be at its own), EPILOGUE_SPLIT stores.
    epilogueSync: { barrier: `${EPILOGUE_BARRIER} + cid`, threads: 128, leader: "True", storeGroups: split },
    dtype,
    writeSetup(w) {
      w.line("EPI_N: tl.constexpr = BLOCK_N // EPILOGUE_SPLIT");
      w.line("a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])");
      w.line("b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])");
      w.line("c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, EPI_N])");
      w.line(`a_ring = tlx.local_alloc((BLOCK_M, BLOCK_K), ${tl}, NUM_STAGES)`);
      w.line(`b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), ${tl}, NUM_STAGES)`);
      w.line("full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)");
      w.line("empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)");
      writeTileCounts(w);
    },
    writeProducerTile(w) {
      writeRingLoads(w, stageBytes, (k) =>
        k.line("tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, stage), [offs_am, ki * BLOCK_K], full)"),
      );
    },
    writeConsumerInit(w) {
      w.line("turn = 0");
      w.comment("Consumer 0 takes the tensor cores first.");
      w.block("if cid == 1", (b) => b.line(`tlx.named_barrier_arrive(${first}, 256)`));
    },
    writeConsumerTile(w, afterStores) {
      w.block("if turn == cid", (t) => {
        t.line("offs_bn = pid_n * BLOCK_N");
        t.line(`tlx.named_barrier_wait(${first} + cid, 256)`);
        t.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)");
        writeRingMmas(t, "stage");
        t.comment("Every wgmma of the tile is issued: the other consumer's turn at the tensor cores.");
        t.line(`tlx.named_barrier_arrive(${second} - cid, 256)`);
        t.line("acc = tlx.async_dot_wait(0, acc)");
        t.line("tlx.barrier_arrive(tlx.local_view(empty_bars, prev))");
        t.comment("Epilogue (overlaps the other consumer's wgmma chain): TMA stores of EPILOGUE_SPLIT column slices.");
        writeEpilogueStores(t, "BLOCK_M", "offs_am", split, tl);
        afterStores?.(t);
      });
      w.block("else", (e) => e.line("it += k_tiles"));
      w.line("turn ^= 1");
    },
  };
}
