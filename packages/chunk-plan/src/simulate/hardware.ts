// Built-in hardware models: plain data (zod-checked) that the cost model reads. Every
// number says whether it was measured on the project's GPU machines or derived, and from
// which file; `H200_SXM` is calibrated from packages/bench/results/gpu (2026-11-22).
import { z } from "zod";
import { SimulateError } from "./errors.js";

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
    /** Peer bandwidth one SM reaches with load/store copies (GB/s). */
    bandwidthPerSmGBps: Pos,
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
   * per-tile speed factor and its own fixed cost (launch, prologue, descriptor set-up), µs.
   * Used when `computeKernel.kind` is `"triton"`.
   */
  tritonGemm: z.object({ efficiency: Pos, launchUs: NonNeg }).optional(),
  /**
   * The copy-engine GEMM+ReduceScatter's reduction kernel: a memory kernel whose speed is
   * limited by the loads its programs keep in flight, `min(hbm, programs · perProgramGBps)`.
   */
  reduceKernel: z.object({ programs: z.number().int().positive(), bandwidthPerProgramGBps: Pos }).optional(),
  contention: z.object({
    /** Fractional slow-down of GEMM tiles while a copy moves data on the same rank. */
    copySlowdown: NonNeg,
    /**
     * Fraction of `copyEngine.bandwidthGBps` a copy-engine transfer reaches while a GEMM runs
     * on its ranks (HBM and L2 shared with the kernel's loads); 1 or absent = no loss.
     */
    copyBandwidthUnderCompute: z.number().positive().max(1).optional(),
  }),
  /** Where each number came from: measured (file, date) or derived (from what). */
  source: z.record(z.string(), z.string()),
});
export type HardwareModel = z.infer<typeof HardwareModel>;

const BASELINES = "packages/bench/results/gpu/baselines-h200-2026-11-22.md (+ -w{2,4,8}-2026-11-22.json)";

/**
 * NVIDIA H200 SXM (141 GB HBM3e, NV18) on the project's 8×H200 machine. GEMM, copy-engine,
 * signal and collective numbers are least-squares fits over the whole measured tables of
 * 2026-11-22 (one pair of parameters per table, not per data point); see docs/simulate.md.
 */
export const H200_SXM: HardwareModel = {
  name: "H200_SXM",
  smCount: 132,
  gemm: { tflopsPerSm: 5.925, tile: { BM: 128, BN: 256 }, launchUs: 22 },
  hbmGBps: 4800,
  memoryBytes: 141e9,
  nvlink: { links: 18, linkGBps: 26.5 },
  copyEngine: { count: 4, bandwidthGBps: 385, launchUs: 6, launchPerRankUs: 3.8 },
  signal: { streamWriteUs: 2.3, streamWritePerRankUs: 0.21, deviceNotifyUs: 1.5 },
  smCopy: { bandwidthPerSmGBps: 10, launchUs: 5 },
  collective: { latencyUs: 54, busGBps: 268 },
  // Least squares of Triton-alone = launch + rounds · tile / efficiency over the three
  // prototype measurements (MLP-1, worlds 2/4/8: 0.613 / 0.334 / 0.270 ms).
  tritonGemm: { efficiency: 1.024, launchUs: 111 },
  // rs-reduce alone: 96 MB in 0.355 ms (0.34–0.37) with 64 programs of 4 warps = 270 GB/s.
  reduceKernel: { programs: 64, bandwidthPerProgramGBps: 4.2 },
  // copyBandwidthUnderCompute: one parameter fitted (least squares of the relative error)
  // over the 12 measured AG+GEMM cases of suite-2026-11-22; in-sample.
  contention: { copySlowdown: 0.05, copyBandwidthUnderCompute: 0.35 },
  source: {
    tritonGemm: "measured: fit (launch + wave-quantised rounds / efficiency) of the Triton persistent TMA GEMM alone, MLP-1 at worlds 2/4/8 (triton_gemm_alone_ms 0.613/0.334/0.270 ms) in packages/bench/results/gpu/prototype-2026-11-22/proto-w{2,4,8}.json",
    reduceKernel: "measured: rs-reduce alone 0.34–0.37 ms on 96 MB (MLP-1, world 2, dev/diag_rs.py; suite-2026-11-22/README.md) with 64 programs × 4 warps → 4.2 GB/s per program; one measurement",
    smCount: "measured: numSms 132 in suite-2026-11-22/*.json (extra.numSms)",
    gemm: `measured: fit of 48 cuBLAS bf16 GEMM times (MLP gemm_ms and gemm_rows with M >= 1024, worlds 2/4/8) in ${BASELINES}: wave-quantised 128×256 tiles, mean error 8.7%, max 25%`,
    hbmGBps: "datasheet: 4.8 TB/s",
    memoryBytes: "datasheet: 141 GB HBM3e",
    nvlink: "measured: NV18, 26.5 GB/s per link per direction (/work/shared/notes/device.md, topology-h200x8-2026-11-22.txt)",
    copyEngine: `measured: copy-engine push 4–256 MiB in ${BASELINES}: 385 GB/s slope; intercept 14/18/37 µs at worlds 2/4/8 fitted as 6 + 3.8·world. count: assumed`,
    signal: `measured: stream_write_value32 2.73/3.39/4.00 µs at worlds 2/4/8 in ${BASELINES}; deviceNotifyUs assumed`,
    smCopy: "derived: NCCL's ~268 GB/s bus bandwidth over its ~24–32 channel SMs; not measured per SM",
    collective: `measured: fit of 36 NCCL all-gather / reduce-scatter times (MLP-1..6, worlds 2/4/8) in ${BASELINES}, mean error 7.9%`,
    contention: "copySlowdown assumed: copies take ~8% of HBM bandwidth beside a compute-bound GEMM. copyBandwidthUnderCompute 0.35: fitted over the 12 ovl AG+GEMM times of packages/bench/results/gpu/suite-2026-11-22 (in-sample; not yet measured by a dedicated copy-beside-GEMM run)",
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
  hbmGBps: 3350,
  memoryBytes: 80e9,
  source: {
    ...H200_SXM.source,
    gemm: "measured: 8192³ bf16 GEMM 798 TFLOP/s on the H100 machine (KINDS.md), wave-quantised with H200_SXM's launch cost",
    hbmGBps: "datasheet: 3.35 TB/s",
    memoryBytes: "datasheet: 80 GB HBM3",
    nvlink: "derived: NVLink 4, NV18, as H200_SXM (not measured on the H100 machine)",
    copyEngine: "derived: equal to H200_SXM (same copy engines and NVLink; not measured on H100)",
    signal: "derived: equal to H200_SXM (not measured on H100)",
    collective: "derived: equal to H200_SXM (same fabric; not measured on H100)",
    tritonGemm: "derived: equal to H200_SXM (not measured on H100)",
    reduceKernel: "derived: equal to H200_SXM (not measured on H100)",
    contention: "derived: equal to H200_SXM (not measured on H100)",
  },
};

/** The built-in models by name. */
export const HARDWARE_MODELS: Readonly<Record<string, HardwareModel>> = { H100_SXM, H200_SXM };

/** Parse a hardware model (a built-in's name or a plain object), with a message naming the bad field. */
export function resolveHardware(input: HardwareModel | string): HardwareModel {
  if (typeof input === "string") {
    const model = HARDWARE_MODELS[input];
    if (model === undefined) {
      throw new SimulateError(
        "bad-hardware",
        `unknown hardware model "${input}": use one of ${Object.keys(HARDWARE_MODELS).join(", ")} or pass a HardwareModel object`,
      );
    }
    return model;
  }
  const parsed = HardwareModel.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new SimulateError("bad-hardware", `hardware.${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data;
}
