// The one table of GPU targets every package reads (emitter limits, simulator hardware,
// tuner memory, runner defaults): SMs, shared memory, caches, memory and link bandwidth,
// dense tensor-core rate. Datasheet figures, each with its source; measurements of the lent
// machines live beside the simulator's calibrations, not here.

/** A GPU an operator is compiled for. */
export interface Target {
  /** Key of the table (`h100`, `h200`, `b200`). */
  readonly name: TargetName;
  /** Marketing name. */
  readonly device: string;
  /** Compilation target of Triton / TLX kernels. */
  readonly arch: "sm_90a" | "sm_100a";
  /** Streaming multiprocessors (the persistent grid of a kernel that owns the GPU). */
  readonly smCount: number;
  /** Shared memory one thread block may use (opt-in maximum), bytes. */
  readonly sharedBytesPerBlock: number;
  readonly l2Bytes: number;
  readonly memoryBytes: number;
  /** Device memory bandwidth, GB/s. */
  readonly hbmGBps: number;
  /** NVLink bandwidth per direction per GPU, GB/s. */
  readonly nvlinkGBpsPerDirection: number;
  /** Dense bf16 tensor-core rate, TFLOP/s. */
  readonly denseBf16Tflops: number;
  /** Where the figures come from. */
  readonly source: string;
}

/** Names of the built-in targets. */
export type TargetName = "h100" | "h200" | "b200";

/** Hopper and Blackwell both let a block opt in to 227 KiB of shared memory. */
const OPT_IN_SHARED = 227 * 1024;

/** The built-in targets. */
export const TARGETS: Readonly<Record<TargetName, Target>> = {
  h100: {
    name: "h100",
    device: "NVIDIA H100 SXM5 80GB",
    arch: "sm_90a",
    smCount: 132,
    sharedBytesPerBlock: OPT_IN_SHARED,
    l2Bytes: 50 * 2 ** 20,
    memoryBytes: 80e9,
    hbmGBps: 3350,
    nvlinkGBpsPerDirection: 450,
    denseBf16Tflops: 989,
    source: "NVIDIA H100 datasheet and Hopper tuning guide (SXM5; 18 NVLink 4 links)",
  },
  h200: {
    name: "h200",
    device: "NVIDIA H200 SXM 141GB",
    arch: "sm_90a",
    smCount: 132,
    sharedBytesPerBlock: OPT_IN_SHARED,
    l2Bytes: 50 * 2 ** 20,
    memoryBytes: 141e9,
    hbmGBps: 4800,
    nvlinkGBpsPerDirection: 450,
    denseBf16Tflops: 989,
    source: "NVIDIA H200 datasheet (same GH100 die as H100 SXM5; HBM3e)",
  },
  b200: {
    name: "b200",
    device: "NVIDIA B200 180GB",
    arch: "sm_100a",
    smCount: 148,
    sharedBytesPerBlock: OPT_IN_SHARED,
    l2Bytes: 126 * 2 ** 20,
    memoryBytes: 180e9,
    hbmGBps: 8000,
    nvlinkGBpsPerDirection: 900,
    denseBf16Tflops: 2250,
    source: "NVIDIA DGX B200 / Blackwell datasheet and tuning guide (NVLink 5)",
  },
};

/** The target of `name` (case-insensitive, `H200_SXM`-style model names accepted). */
export function target(name: string): Target {
  const key = name.toLowerCase().replace(/_.*$/, "") as TargetName;
  const t = TARGETS[key];
  if (t === undefined) throw new RangeError(`unknown target "${name}" (known: ${Object.keys(TARGETS).join(", ")})`);
  return t;
}

/** The target compiled for when none is named. */
export const DEFAULT_TARGET: Target = TARGETS.h200;
