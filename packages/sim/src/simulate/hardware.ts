// Built-in hardware models: plain data (zod-checked) that the cost model reads. Every
// number says whether it was measured on the project's GPU machines or derived, and from
// which file; `H200_SXM` is calibrated from the GPU runs of 2026-11-22 (evidence: `results/runs/baselines-h200-2026-11-22`).
import { TARGETS } from "@ovl/primitives";
import { z } from "zod";
import { NodeTopology } from "./network.js";

const Pos = z.number().positive();
const NonNeg = z.number().nonnegative();

/**
 * A GPU and its intra-node fabric as the simulator sees it. Times in µs, bandwidths in
 * GB/s (1e9 bytes/s), throughput in TFLOP/s.
 */
export const HardwareModel = z.object({
  /** Model name, e.g. `H200_SXM`. */
  name: z.string().min(1),
  /** Streaming multiprocessors available to kernels. */
  smCount: z.number().int().positive(),
  gemm: z.object({
    /** Sustained bf16 tensor-core throughput of one SM inside a large GEMM (TFLOP/s). */
    tflopsPerSm: Pos,
    /** Output tile the throughput was fitted with; per-tile time = 2·BM·BN·K / tflopsPerSm. */
    tile: z.object({ BM: z.number().int().positive(), BN: z.number().int().positive() }),
    /** Fixed cost of one GEMM kernel (launch, prologue, epilogue), µs. */
    launchUs: NonNeg,
  }),
  /** HBM bandwidth (GB/s): local copies and the reduction pass of a ReduceScatter. */
  hbmGBps: Pos,
  /** Device memory in bytes (for pruning candidates that do not fit). */
  memoryBytes: Pos,
  nvlink: z.object({
    /** NVLink links per GPU. */
    links: z.number().int().positive(),
    /** Bandwidth of one link per direction (GB/s). */
    linkGBps: Pos,
  }),
  copyEngine: z.object({
    /** Copy engines a GPU can run at once (streams beyond this queue). */
    count: z.number().int().positive(),
    /** Bandwidth one copy-engine transfer reaches to a peer (GB/s). */
    bandwidthGBps: Pos,
    /** Per-transfer start-up cost: `launchUs + launchPerRankUs · world` (host launch contention grows with processes). */
    launchUs: NonNeg,
    launchPerRankUs: NonNeg,
  }),
  signal: z.object({
    /** A host-issued stream write of a signal: `streamWriteUs + streamWritePerRankUs · world`. */
    streamWriteUs: NonNeg,
    streamWritePerRankUs: NonNeg,
    /** A device-side release add plus the consumer's acquire poll seeing it. */
    deviceNotifyUs: NonNeg,
  }),
  smCopy: z.object({
    /**
     * Bandwidth one SM reaches with load/store copies, to a peer or within the GPU (GB/s): `n` SMs
     * move `n · bandwidthPerSmGBps`, or, with `peakGBps`, `n · b · peak / (n · b + peak)` (a GPU's
     * stores saturate: `n` SMs reach half the peak at `peak / b` SMs); see `smCopyGBps`.
     */
    bandwidthPerSmGBps: Pos,
    /** What SM copies on many SMs approach out of one GPU (GB/s); absent: no saturation. */
    peakGBps: Pos.optional(),
    /** Launch of the communication kernel, µs. */
    launchUs: NonNeg,
  }),
  collective: z.object({
    /** NCCL-like collective: `latencyUs + bytes · (n-1)/n / busGBps`. */
    latencyUs: NonNeg,
    busGBps: Pos,
  }),
  /**
   * The emitted Triton persistent TMA GEMM relative to the cuBLAS-class calibration above:
   * per-tile speed factor and its own fixed cost (launch, prologue, descriptor set-up), µs;
   * `tiles`: further speed factors of other tile shapes (with the emitter's launch defaults
   * for them) relative to the calibrated `gemm.tile`; a tile not listed gets 1. Used when
   * `computeKernel.kind` is `"triton"`.
   */
  tritonGemm: z
    .object({
      efficiency: Pos,
      launchUs: NonNeg,
      tiles: z
        .array(
          z.object({ BM: z.number().int().positive(), BN: z.number().int().positive(), BK: z.number().int().positive(), efficiency: Pos }),
        )
        .optional(),
    })
    .optional(),
  /**
   * GEMM+ReduceScatter's reduction kernel (`rs-reduce`, after the deliveries of either
   * backend): a persistent memory kernel of `programs` programs (default grid) reading every
   * delivered partial and writing the sum once. Each program keeps a fixed number of loads
   * in flight, so its bandwidth saturates in the grid:
   * `peakGBps · programs / (programs + halfPrograms)`; a pass costs
   * `launchUs + bytes / bandwidth`.
   */
  reduceKernel: z.object({ programs: z.number().int().positive(), peakGBps: Pos, halfPrograms: NonNeg, launchUs: NonNeg }).optional(),
  contention: z.object({
    /** Fractional slow-down of GEMM tiles while a copy moves data on the same rank. */
    copySlowdown: NonNeg,
    /**
     * Fraction of `copyEngine.bandwidthGBps` a copy-engine transfer reaches while a GEMM runs
     * on its ranks (HBM and L2 shared with the kernel's loads); 1 or absent = no loss.
     */
    copyBandwidthUnderCompute: z.number().positive().max(1).optional(),
  }),
  /**
   * Several nodes (absent: one node, any number of ranks, every transfer over NVLink): ranks
   * `n · gpusPerNode … (n + 1) · gpusPerNode − 1` form node `n`; a transfer between nodes goes
   * over the NICs of its two ranks (`./network.ts`), one inside a node over NVLink as above.
   * `multiNode` builds one from a single-node model.
   */
  topology: NodeTopology.optional(),
  /** Where each number came from: measured (file, date) or derived (from what). */
  source: z.record(z.string(), z.string()),
});
export type HardwareModel = z.infer<typeof HardwareModel>;

const BASELINES = "results/runs/baselines-h200-2026-11-22 (README.md, baselines-h200-w{2,4,8}-2026-11-22.json)";

/**
 * The emitted Triton GEMM as the runs of 2026-11-22 ran it (the base bodies at the fixed
 * 128×256×64 default, before tuned tables and flattened bodies): least squares (relative
 * error) of launch + rounds · tile / efficiency over that kernel alone on six MLP problems
 * (tiles-2026-11-22, mean error 3.6%), each other tile's factor by the same fit with launch
 * and efficiency held. The accuracy checks against those runs simulate with it.
 */
export const TRITON_GEMM_2026_11_22: NonNullable<HardwareModel["tritonGemm"]> = {
  efficiency: 0.932,
  launchUs: 20,
  tiles: [
    { BM: 128, BN: 128, BK: 64, efficiency: 0.938 },
    { BM: 256, BN: 128, BK: 64, efficiency: 0.95 },
    { BM: 64, BN: 256, BK: 64, efficiency: 0.918 },
    { BM: 128, BN: 64, BK: 64, efficiency: 0.564 },
    { BM: 64, BN: 128, BK: 64, efficiency: 0.608 },
  ],
};
const RS_REDUCE = "results/runs/rs-reduce-2026-11-22";

/**
 * NVIDIA H200 SXM (141 GB HBM3e, NV18) on the project's 8×H200 machine. GEMM, copy-engine,
 * signal and collective numbers are least-squares fits over the whole measured tables of
 * 2026-11-22 (one pair of parameters per table, not per data point); see docs/simulate.md.
 */
export const H200_SXM: HardwareModel = {
  name: "H200_SXM",
  smCount: TARGETS.h200.smCount,
  gemm: { tflopsPerSm: 5.925, tile: { BM: 128, BN: 256 }, launchUs: 22 },
  hbmGBps: TARGETS.h200.hbmGBps,
  memoryBytes: TARGETS.h200.memoryBytes,
  nvlink: { links: 18, linkGBps: 26.5 },
  copyEngine: { count: 4, bandwidthGBps: 385, launchUs: 6, launchPerRankUs: 3.8 },
  signal: { streamWriteUs: 2.3, streamWritePerRankUs: 0.21, deviceNotifyUs: 1.5 },
  // The SM copy kernels emitted since 2026-11-27 as measured on H100s (same SMs and NVLink 4); the
  // kernel of 2026-11-22 (4 warps, 2048 elements a step) fitted 7.35 GB/s per SM, linear, on suite2
  // (H200_AS_OF_2026_11_22 in the accuracy checks keeps that).
  smCopy: { bandwidthPerSmGBps: 39.7, peakGBps: 254, launchUs: 5 },
  collective: { latencyUs: 54, busGBps: 268 },
  // Least squares (relative error) of Triton-alone = launch + rounds · tile / (efficiency ·
  // factor[tile]) over the tuned emitted kernels (waits / notifies in) of the 36 MLP per-rank
  // shapes (scripts/compute-tables/fit-triton-gemm.ts; launch came out negative and is held at 0).
  tritonGemm: {
    efficiency: 0.902,
    launchUs: 0,
    tiles: [
      { BM: 128, BN: 128, BK: 64, efficiency: 1.021 },
      { BM: 256, BN: 128, BK: 64, efficiency: 1.004 },
      { BM: 64, BN: 256, BK: 64, efficiency: 1.04 },
      { BM: 256, BN: 128, BK: 32, efficiency: 0.988 },
      { BM: 128, BN: 256, BK: 32, efficiency: 0.976 },
    ],
  },
  // rs-reduce alone (vectorised, 4 warps, 128×128 tiles, ranks unrolled, system-scope waits):
  // least squares (relative error) of launch + bytes / (peak · p / (p + half)) over its six
  // H200 times (3 slabs × 64 / 264 programs), mean error 2.0%, max 3.9%. Default grid: one
  // program per SM, as emitted.
  reduceKernel: { programs: 132, peakGBps: 4410, halfPrograms: 85, launchUs: 16.5 },
  // copyBandwidthUnderCompute: one parameter fitted (least squares of the relative error)
  // over the 12 measured AG+GEMM cases of suite-2026-11-22 (in-sample there; out of sample
  // on suite2-2026-11-22).
  contention: { copySlowdown: 0.05, copyBandwidthUnderCompute: 0.35 },
  source: {
    tritonGemm:
      "measured: least squares (relative error) of launch + wave-quantised rounds / (efficiency · factor[tile]) over the tuned emitted kernels (the h200 table's configurations, waits / notifies in, signals set) of the 36 MLP per-rank GEMMs in results/runs/tlx-backend-h200-2026-11-26/run2/bench-h200.json (one H200, 2026-11-26): mean error 1.8%, max 9.1%; out of sample on run1 of the same folder (mean 2.3%, max 9.0%) and producer-flat-h200-2026-11-26 (mean 2.7%, max 9.3%). packages/sim/scripts/compute-tables/fit-triton-gemm.ts. Replaces the 128×256×64-only fit of tiles-2026-11-22 (launch 20 µs, efficiency 0.932), 21% off at world-8 shapes of the tuned kernels",
    reduceKernel: `measured: ${RS_REDUCE}/rs-reduce-h200-quick.json, the emitted variant (w4 bn128 unroll sys) at 64 and 264 programs on slabs H4096_w2, H4096_w4, H8192_w2: least squares (relative error) of launchUs + bytes / (peakGBps · p / (p + halfPrograms)), bytes = (W + 1) · rows · N · 2; mean error 2.0%, max 3.9%. The functional form is checked on the H100 sweep (rs-reduce-h100.json, 64..2048 programs: mean error 4.8%). programs 132: the emitted grid (one per SM)`,
    smCount: "measured: numSms 132 in suite-2026-11-22/*.json (extra.numSms)",
    gemm: `measured: fit of 48 cuBLAS bf16 GEMM times (MLP gemm_ms and gemm_rows with M >= 1024, worlds 2/4/8) in ${BASELINES}: wave-quantised 128×256 tiles, mean error 8.7%, max 25%`,
    hbmGBps: "datasheet: 4.8 TB/s",
    memoryBytes: "datasheet: 141 GB HBM3e",
    nvlink: "measured: NV18, 26.5 GB/s per link per direction (/work/shared/notes/device.md, topology-h200x8-2026-11-22.txt)",
    copyEngine: `measured: copy-engine push 4–256 MiB in ${BASELINES}: 385 GB/s slope; intercept 14/18/37 µs at worlds 2/4/8 fitted as 6 + 3.8·world. count: assumed`,
    signal: `measured: stream_write_value32 2.73/3.39/4.00 µs at worlds 2/4/8 in ${BASELINES}; deviceNotifyUs assumed`,
    smCopy:
      "derived: H100_SXM's law for the SM copy kernels emitted since 2026-11-27 (not run on H200s: same SMs and NVLink 4). The kernel of 2026-11-22 fitted bandwidthPerSmGBps 7.35, linear, over the 24 SM-push GEMM+RS times of results/runs/suite2-2026-11-22/x2-w{2,4}.json (MLP-1..6, 8 and 16 copy SMs; in-sample there, mean error 4.0%), tested on the 4 of x1-w{2,4}.json (mean error 3.7%). launchUs assumed",
    collective: `measured: fit of 36 NCCL all-gather / reduce-scatter times (MLP-1..6, worlds 2/4/8) in ${BASELINES}, mean error 7.9%`,
    contention:
      "copySlowdown assumed: copies take ~8% of HBM bandwidth beside a compute-bound GEMM. copyBandwidthUnderCompute 0.35: fitted over the 12 ovl AG+GEMM times of results/runs/suite-2026-11-22 (in-sample there; out of sample on suite2-2026-11-22; not yet measured by a dedicated copy-beside-GEMM run)",
  },
};

/**
 * NVIDIA H100 SXM (80 GB HBM3, NV18). Same GH100 die, SM count, NVLink 4 and copy engines
 * as the H200, so fabric numbers are taken from `H200_SXM`; the GEMM throughput comes from
 * the one measured 8192³ bf16 GEMM (798 TFLOP/s) and HBM from the datasheet.
 */
export const H100_SXM: HardwareModel = {
  ...H200_SXM,
  name: "H100_SXM",
  // 8192³: 2048 tiles of 128×256 = 16 rounds on 132 SMs; 1.378 ms - 22 µs launch → 6.34 TFLOP/s per SM.
  gemm: { tflopsPerSm: 6.34, tile: { BM: 128, BN: 256 }, launchUs: 22 },
  hbmGBps: TARGETS.h100.hbmGBps,
  memoryBytes: TARGETS.h100.memoryBytes,
  // rs-reduce alone on one H100, the emitted variant at 64 / 132 / 264 / 528 / all programs
  // on three slabs: least squares of the same law, 15 times, mean error 4.8%, max 9.1%.
  reduceKernel: { programs: 132, peakGBps: 3060, halfPrograms: 43, launchUs: 21 },
  // sm-push alone (waits met), 8 warps moving 8192 elements a step (the emitter's defaults since
  // 2026-11-27), 4 to 64 programs on four and two H100s: peak · n / (n + 6.4), peak 254 GB/s
  // (least squares of the relative error over 9 times, mean error 4.8%, max 10.1%).
  smCopy: { bandwidthPerSmGBps: 39.7, peakGBps: 254, launchUs: 5 },
  // The H200's fit over the H100's own tuned kernels (fit-triton-gemm.ts).
  tritonGemm: {
    efficiency: 0.877,
    launchUs: 7.9,
    tiles: [
      { BM: 256, BN: 128, BK: 64, efficiency: 1.04 },
      { BM: 128, BN: 256, BK: 32, efficiency: 0.991 },
      { BM: 64, BN: 256, BK: 64, efficiency: 1.027 },
    ],
  },
  source: {
    ...H200_SXM.source,
    gemm: "measured: 8192³ bf16 GEMM 798 TFLOP/s on the H100 machine (KINDS.md), wave-quantised with H200_SXM's launch cost",
    hbmGBps: "datasheet: 3.35 TB/s",
    memoryBytes: "datasheet: 80 GB HBM3",
    nvlink: "derived: NVLink 4, NV18, as H200_SXM (not measured on the H100 machine)",
    copyEngine: "derived: equal to H200_SXM (same copy engines and NVLink; not measured on H100)",
    signal: "derived: equal to H200_SXM (not measured on H100)",
    collective: "derived: equal to H200_SXM (same fabric; not measured on H100)",
    tritonGemm:
      "measured: the same fit over results/runs/tlx-backend-h100-2026-11-26/run2/bench-h100.json (one H100, the h100 table's tuned kernels): mean error 2.2%, max 9.8%; out of sample on run1, run3, run4 (mean 3.1–4.5%, max 7.5–11.7%)",
    reduceKernel: `measured: ${RS_REDUCE}/rs-reduce-h100.json, the emitted variant (w4 bn128 unroll sys) at 64..2048 programs on slabs H4096_w2, H4096_w4, H8192_w2: least squares (relative error) of launchUs + bytes / (peakGBps · p / (p + halfPrograms)); 15 times, mean error 4.8%, max 9.1%`,
    contention:
      "derived: equal to H200_SXM (not measured on H100 for the model; results/runs/sm-push-h100x4-2026-11-27/ measured on four H100s that the GEMM, not the copies, slows beside copy-engine traffic: producer 0.318 → 0.431 ms, copies 0.228 → 0.254 ms, which the model's copyBandwidthUnderCompute attributes the other way)",
    smCopy:
      "measured: sm-push alone (waits met; 8 warps, 8192 elements a step) with 4, 8, 16, 32, 64 programs at MLP-1 world 4 (50.3 MB a GPU: 0.535, 0.338, 0.275, 0.270, 0.221 ms) and 4, 8, 16, 32 at MLP-2 world 2 (33.5 MB: 0.383, 0.225, 0.188, 0.167 ms) in results/runs/push-rate-h100x4-2026-11-27/: least squares (relative error) of launchUs + bytes / (peak · n / (n + half)), peak 254 GB/s, half 6.4 SMs (bandwidthPerSmGBps = peak / half), mean error 4.8%, max 10.1%; launchUs as H200_SXM",
  },
};

/** The built-in models by name. */
export const HARDWARE_MODELS: Readonly<Record<string, HardwareModel>> = { H100_SXM, H200_SXM };
