// The Blackwell (sm_100a) GEMM tile and its kernel assembly: a TMA load task fills an smem
// ring, a one-warp MMA task issues tcgen05 MMAs into accumulators in tensor memory (TMEM),
// and the epilogue task reads a finished accumulator back from TMEM and stores C by TMA.
// TMEM holds `accBuffers` accumulators, so the MMAs of the next tile overlap the epilogue
// of the last one. Compiled ahead of time for sm_100a; not run (no Blackwell GPU is lent).
import { TARGETS } from "@ovl/primitives";
import { checkBlock, checkPositive } from "../triton/kernels/common.js";
import { TL_DTYPE, type ElementType } from "../../core/device/index.js";
import type { KernelTemplateInfo } from "../triton/kernels/index.js";
import { EmitError, type PythonWriter } from "../../core/writer/index.js";
import { checkRingFits, ringStageBytes, writeRingLoads, writeTileCounts } from "./compute.js";
import { mergeParams, type TlxKernel, type TlxPartParams, type TlxSchedulePart, tlxModule, tlxSignature } from "./parts.js";

/** Tiling and pipelining of `tlxGemmBlackwell`. */
export interface TlxGemmBlackwellParams {
  /** Rows of a tile: 128 (one tcgen05 MMA of M = 128 over the 128 TMEM lanes). */
  readonly BLOCK_M: number;
  readonly BLOCK_N: number;
  readonly BLOCK_K: number;
  /** Ring depth: stages of A/B in shared memory (default 4). */
  readonly stages?: number;
  /** Accumulators in TMEM (default 2: MMA of one tile overlaps the epilogue of the last). */
  readonly accBuffers?: number;
  /** Columns the epilogue loads from TMEM and stores per step (default min(BLOCK_N, 64)). */
  readonly epilogueN?: number;
  /** Registers per thread of the one-warp load and MMA tasks (default 48). */
  readonly taskRegisters?: number;
  /** Element type (bf16 or fp16: tcgen05 kind::f16 operands). */
  readonly dtype?: ElementType;
}

/** Shared memory an sm_100 CTA may use (227 KiB). */
export const SM100_MAX_SHARED_BYTES = TARGETS.b200.sharedBytesPerBlock;
/** Columns of tensor memory (32-bit cells, 128 lanes) of an SM. */
export const SM100_TMEM_COLUMNS = 512;

/**
 * Shared memory a `tlxGemmBlackwell` takes, in bytes: the A and B stages of the ring plus
 * the epilogue's staging tile (`BLOCK_M × epilogueN`); barriers add a few hundred bytes
 * (fbtriton 3.7.4 reports 213220 B at 128×256×64, 4 stages, epilogueN 64).
 */
export function tlxGemmBlackwellSharedBytes(p: TlxGemmBlackwellParams): number {
  return (p.stages ?? 4) * ringStageBytes(p) + p.BLOCK_M * (p.epilogueN ?? Math.min(p.BLOCK_N, 64)) * 2;
}

/**
 * A Blackwell compute part: kernel-scope setup, then what each of the three tasks does
 * with one tile (`pid_m`, `pid_n`, `offs_am` defined by the loop). The load and MMA tasks
 * are one warp each (`taskRegisters`); the epilogue is the default task (4 warps: one per
 * 32 TMEM lanes).
 */
export interface TlxBlackwellComputePart extends TlxPartParams {
  readonly name: string;
  readonly dtype: ElementType;
  readonly taskRegisters: number;
  writeSetup(w: PythonWriter): void;
  writeLoadTile(w: PythonWriter): void;
  writeMmaTile(w: PythonWriter): void;
  writeEpilogueTile(w: PythonWriter): void;
}

/**
 * The Blackwell GEMM part, `C[M,N] = A[M,K] @ B[K,N]`. Setup: descriptors of A
 * (`[BLOCK_M, BLOCK_K]`), B (`[BLOCK_K, BLOCK_N]`) and C (`[BLOCK_M, EPILOGUE_N]`); rings
 * `a_ring`, `b_ring` (stages) with `full` (arrive count 1: expect-bytes, completed by TMA)
 * and `empty` barriers (completed by the MMA that read the stage: `mBarriers=` of
 * `tlx.async_dot`); `NUM_ACC` fp32 `[BLOCK_M, BLOCK_N]` accumulators in TMEM
 * (`local_alloc(..., tlx.storage_kind.tmem)`) with `acc_full` barriers (a `tcgen05_commit`
 * after a tile's last MMA: it completes when all of them have) and `acc_empty` barriers
 * (the epilogue's arrive once it has read the accumulator). Ring position `it` counts
 * k-steps over the whole loop, `t` counts tiles: stage `it % NUM_STAGES`, accumulator
 * `t % NUM_ACC`, phases `(it // NUM_STAGES) & 1` and `(t // NUM_ACC) & 1`; the waits on
 * `empty` and `acc_empty` take the opposite phase, so the first pass does not block.
 * @throws {EmitError} `bad-param` for BLOCK_M other than 128, blocks that are not powers
 *   of two, fp32, accumulators beyond 512 TMEM columns, an epilogue step that does not
 *   divide BLOCK_N, or rings beyond shared memory.
 */
export function tlxGemmBlackwell(params: TlxGemmBlackwellParams): TlxBlackwellComputePart {
  const dtype = params.dtype ?? "bf16";
  if (dtype !== "bf16" && dtype !== "fp16")
    throw new EmitError("bad-param", `the Blackwell TLX GEMM takes bf16 or fp16 operands (tcgen05 kind::f16), got ${String(dtype)}`);
  if (params.BLOCK_M !== 128)
    throw new EmitError(
      "bad-param",
      `BLOCK_M must be 128 on sm_100a (one MMA over the 128 TMEM lanes, read by 4 epilogue warps), got ${String(params.BLOCK_M)}`,
    );
  const BLOCK_M = 128;
  const BLOCK_N = checkBlock(params.BLOCK_N, "BLOCK_N", 32, 256);
  const BLOCK_K = checkBlock(params.BLOCK_K, "BLOCK_K", 16, 128);
  const stages = checkPositive(params.stages ?? 4, "stages");
  const accBuffers = checkPositive(params.accBuffers ?? 2, "accBuffers");
  const epilogueN = checkBlock(params.epilogueN ?? Math.min(BLOCK_N, 64), "epilogueN", 16, BLOCK_N);
  const taskRegisters = checkPositive(params.taskRegisters ?? 48, "taskRegisters");
  if (taskRegisters % 8 !== 0 || taskRegisters < 24 || taskRegisters > 256) {
    throw new EmitError("bad-param", `taskRegisters must be a multiple of 8 in [24, 256], got ${taskRegisters}`);
  }
  if (accBuffers * BLOCK_N > SM100_TMEM_COLUMNS) {
    throw new EmitError(
      "bad-param",
      `${accBuffers} fp32 accumulators of ${BLOCK_N} columns exceed the ${SM100_TMEM_COLUMNS} columns of tensor memory; use fewer accBuffers or a narrower BLOCK_N`,
    );
  }
  checkRingFits(
    { BLOCK_M, BLOCK_N, BLOCK_K },
    stages,
    tlxGemmBlackwellSharedBytes({ BLOCK_M, BLOCK_N, BLOCK_K, stages, epilogueN }),
    SM100_MAX_SHARED_BYTES,
  );
  const tl = TL_DTYPE[dtype];
  const stageBytes = ringStageBytes({ BLOCK_M, BLOCK_N, BLOCK_K });
  return {
    name: "tlx-gemm-sm100",
    args: ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"],
    constexprs: { BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES: stages, NUM_ACC: accBuffers, EPILOGUE_N: epilogueN },
    expect: [
      "tcgen05\\.alloc",
      "tcgen05\\.mma\\.cta_group::1\\.kind::f16",
      "tcgen05\\.commit\\.cta_group::1\\.mbarrier::arrive",
      "tcgen05\\.ld\\.sync",
      "mbarrier\\.try_wait",
      "cp\\.async\\.bulk\\.tensor\\.2d\\.shared::cta\\.global\\.mbarrier::complete_tx",
      "cp\\.async\\.bulk\\.tensor\\.2d\\.global\\.shared::cta",
    ],
    dtype,
    taskRegisters,
    writeSetup(w) {
      w.line("a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])");
      w.line("b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])");
      w.line("c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, EPILOGUE_N])");
      w.line(`a_ring = tlx.local_alloc((BLOCK_M, BLOCK_K), ${tl}, NUM_STAGES)`);
      w.line(`b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), ${tl}, NUM_STAGES)`);
      w.line("acc_tmem = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float32, NUM_ACC, tlx.storage_kind.tmem)");
      w.line("full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)");
      w.line("empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)");
      w.line("acc_full_bars = tlx.alloc_barriers(num_barriers=NUM_ACC, arrive_count=1)");
      w.line("acc_empty_bars = tlx.alloc_barriers(num_barriers=NUM_ACC, arrive_count=1)");
      writeTileCounts(w);
    },
    writeLoadTile(w) {
      writeRingLoads(w, stageBytes, (k) =>
        k.line("tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, stage), [offs_am, ki * BLOCK_K], full)"),
      );
    },
    writeMmaTile(w) {
      w.line("buf = t % NUM_ACC");
      w.comment("Wait until the epilogue has read this accumulator (its previous tile).");
      w.line("tlx.barrier_wait(tlx.local_view(acc_empty_bars, buf), ((t // NUM_ACC) & 1) ^ 1)");
      w.line("acc = tlx.local_view(acc_tmem, buf)");
      w.block("for ki in range(k_tiles)", (k) => {
        k.line("stage = it % NUM_STAGES");
        k.line("tlx.barrier_wait(tlx.local_view(full_bars, stage), (it // NUM_STAGES) & 1)");
        k.comment("tcgen05 MMA into TMEM; its completion frees the stage for the loads.");
        k.line(
          "tlx.async_dot(tlx.local_view(a_ring, stage), tlx.local_view(b_ring, stage), acc, use_acc=ki > 0, mBarriers=[tlx.local_view(empty_bars, stage)])",
        );
        k.line("it += 1");
      });
      w.comment("acc_full completes once every MMA issued so far has.");
      w.line("tlx.tcgen05_commit(tlx.local_view(acc_full_bars, buf))");
      w.line("t += 1");
    },
    writeEpilogueTile(w) {
      w.line("offs_bn = pid_n * BLOCK_N");
      w.line("buf = t % NUM_ACC");
      w.line("tlx.barrier_wait(tlx.local_view(acc_full_bars, buf), (t // NUM_ACC) & 1)");
      w.line("acc = tlx.local_view(acc_tmem, buf)");
      w.block("for e in tl.static_range(BLOCK_N // EPILOGUE_N)", (e) => {
        e.line("part = tlx.local_load(tlx.subslice(acc, e * EPILOGUE_N, EPILOGUE_N))");
        e.line(`c_desc.store([offs_am, offs_bn + e * EPILOGUE_N], part.to(${tl}))`);
      });
      w.comment("The accumulator is in registers and stored: the MMA task may overwrite it.");
      w.line("tlx.barrier_arrive(tlx.local_view(acc_empty_bars, buf))");
      w.line("t += 1");
    },
  };
}

/** What `tlxBlackwellKernel` is built from. */
export interface TlxBlackwellKernelSpec {
  /** The manifest's `template.kind` (kebab-case). */
  readonly kind: string;
  /** Name of the `@triton.jit` entry. */
  readonly entry: string;
  /** One line on what the kernel computes (the module docstring). */
  readonly summary: string;
  readonly compute: TlxBlackwellComputePart;
  readonly schedule: TlxSchedulePart;
}

/** Warps of the epilogue (default task): `num_warps`, one warp per 32 TMEM lanes. */
const EPILOGUE_WARPS = 4;

/**
 * Assemble the sm_100a kernel: kernel-scope setup of the compute part and the schedule,
 * then `with tlx.async_tasks():` holding the epilogue (`async_task("default")`, 4 warps,
 * the schedule's issuer), the MMA task and the load task (`num_warps=1`, `registers=`).
 * Every task walks the schedule's tile loop, so they agree on which tile each stage and
 * accumulator holds.
 * @throws {EmitError} `bad-param` on conflicting parts.
 */
export function tlxBlackwellKernel(spec: TlxBlackwellKernelSpec): TlxKernel {
  const merged = mergeParams([spec.compute, spec.schedule]);
  const info: KernelTemplateInfo = { kind: spec.kind, entry: spec.entry, args: merged.args, constexprs: Object.keys(merged.constexprs) };
  const regs = spec.compute.taskRegisters;
  const source = tlxModule(spec.summary, "TLX, warp-specialised, sm_100a", spec.compute.dtype, (w) =>
    w.block(tlxSignature(spec.entry, merged), (b) => {
      spec.compute.writeSetup(b);
      spec.schedule.writeSetup?.(b, 3);
      b.block("with tlx.async_tasks()", (t) => {
        t.block(`with tlx.async_task("default")`, (e) => {
          e.comment("Epilogue: accumulator from TMEM to registers, C by TMA store.");
          e.line("t = 0");
          spec.schedule.writeTileLoop(
            e,
            (l) => {
              l.line("offs_am = pid_m * BLOCK_M");
              spec.compute.writeEpilogueTile(l);
            },
            { issuer: true },
          );
        });
        t.block(`with tlx.async_task(num_warps=1, registers=${regs})`, (m) => {
          m.comment("MMA: tcgen05 MMAs of a tile into one TMEM accumulator.");
          m.line("it = 0");
          m.line("t = 0");
          spec.schedule.writeTileLoop(m, (l) => spec.compute.writeMmaTile(l), { issuer: false });
        });
        t.block(`with tlx.async_task(num_warps=1, registers=${regs})`, (p) => {
          p.comment("Loads: TMA of A and B into the ring.");
          p.line("it = 0");
          spec.schedule.writeTileLoop(
            p,
            (l) => {
              l.line("offs_am = pid_m * BLOCK_M");
              spec.compute.writeLoadTile(l);
            },
            { issuer: false },
          );
        });
      });
    }),
  );
  // The compiler launches whole warp groups: 4 + 1 + 1 warps make 8.
  const totalWarps = Math.ceil((EPILOGUE_WARPS + 2) / 4) * 4;
  return { info, constexprs: merged.constexprs, source, numWarps: EPILOGUE_WARPS, totalWarps, expect: merged.expect };
}
