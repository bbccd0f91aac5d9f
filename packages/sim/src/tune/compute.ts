// Per-shape compute configurations of the persistent GEMM bodies: the space of tiles,
// pipeline depths, warps, L2 groupings and body variants; what fits a target (shared
// memory, registers); a closed-form model that ranks them; and the set a GPU run measures.
import { TARGETS, type TargetName } from "@ovl/primitives";
import { SM_STORE_BYTES_PER_US, streamKSplit } from "../simulate/cost.js";
import { TuneError } from "./errors.js";

/** Which side of an overlapped operator the GEMM body is: AG+GEMM's consumer, GEMM+RS's producer. */
export type ComputeRole = "consumer" | "producer";

/** A per-rank GEMM `C[M×N] = A[M×K]·B[K×N]` as one compute kernel sees it. */
export interface ComputeProblem {
  readonly role: ComputeRole;
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly dtype: "bf16" | "fp16" | "fp32";
}

/** A built-in body variant: its role, whether its tile loop is flattened, how it stores C. */
export interface ComputeBody {
  /** File name under `@ovl/tlx-emitter/kernels/` without `.py`. */
  readonly name: string;
  readonly role: ComputeRole;
  /** `tl.range(..., flatten=True)`: the next tile's loads are issued during this tile's epilogue. */
  readonly flatten: boolean;
  /** How C leaves the SM: one TMA store of the tile, two TMA stores of half tiles, or masked pointer stores. */
  readonly epilogue: "tma" | "tma-half" | "pointer";
  /**
   * The last, partial wave: `wave` runs its tiles whole (the other programs idle); `stream-k`
   * cuts each into up to 4 pieces along K that run at once, the last piece adding the fp32
   * partials (`kernels/gemm_tma_persistent_streamk.py`).
   */
  readonly tail?: "wave" | "stream-k";
}

/** The body variants the space spans (one family per role; the first of each is the plain body). */
export const COMPUTE_BODIES: readonly ComputeBody[] = [
  { name: "gemm_tma_persistent", role: "consumer", flatten: false, epilogue: "tma" },
  { name: "gemm_tma_persistent_flat", role: "consumer", flatten: true, epilogue: "tma-half" },
  { name: "gemm_tma_persistent_streamk", role: "consumer", flatten: false, epilogue: "tma-half", tail: "stream-k" },
  { name: "gemm_producer", role: "producer", flatten: false, epilogue: "pointer" },
  { name: "gemm_producer_tma", role: "producer", flatten: false, epilogue: "tma-half" },
  // Flattens with the notify in its epilogue: the notify is a masked call with no branch around it.
  { name: "gemm_producer_tma_flat", role: "producer", flatten: true, epilogue: "tma-half" },
];

/** One compute configuration: body, tile, L2 grouping and launch. */
export interface ComputeConfig {
  readonly body: string;
  readonly BM: number;
  readonly BN: number;
  readonly BK: number;
  readonly groupM: number;
  readonly numStages: number;
  readonly numWarps: number;
}

/** The values each knob of a compute configuration takes. */
export interface ComputeSpace {
  readonly bodies: readonly string[];
  readonly BM: readonly number[];
  readonly BN: readonly number[];
  readonly BK: readonly number[];
  readonly stages: readonly number[];
  readonly warps: readonly number[];
  /** L2 groupings; the model does not price them, so ranking uses the first. */
  readonly groupM: readonly number[];
}

/**
 * The default space. Triton's block shapes are powers of two, so a 192-column tile is not a
 * tile of these bodies; ragged edges come from N not dividing BN (the last column of tiles is
 * partly masked by TMA bounds).
 */
export const DEFAULT_COMPUTE_SPACE: ComputeSpace = {
  bodies: COMPUTE_BODIES.map((b) => b.name),
  BM: [64, 128, 256],
  BN: [64, 128, 256],
  BK: [32, 64, 128],
  stages: [2, 3, 4, 5, 6],
  warps: [4, 8],
  groupM: [8, 4, 16],
};

/**
 * Constants of the ranking model, shared by H100 and H200 (the same GH100 die and clocks).
 * Fitted by hand to the emitted kernel's tile sweep (evidence: `results/runs/tiles-2026-11-22`):
 * the model only has to put the fastest configurations in the measured top k.
 */
export interface ComputeModel {
  /** Sustained bf16 tensor rate of one SM (TFLOP/s): the target's dense rate over its SMs, times `sustained`. */
  readonly tflopsPerSm: number;
  /** Bytes per µs one SM's operand feed (L2 → TMA → shared → wgmma) sustains. */
  readonly feedBytesPerUs: number;
  /** Latency of one TMA load under load (µs): the ring keeps `stages − 2` of them in flight. */
  readonly loadLatencyUs: number;
  /** Bytes per µs of the epilogue's stores (registers → shared → global) on one SM. */
  readonly storeBytesPerUs: number;
  /** Fixed cost of one persistent launch (descriptor set-up, first loads), µs. */
  readonly launchUs: number;
  readonly smCount: number;
  readonly sharedBytesPerBlock: number;
}

/** The model of a target from the one table of targets. */
export function computeModel(target: TargetName = "h100"): ComputeModel {
  const t = TARGETS[target];
  return {
    // cuBLAS sustains ~80% of the dense rate at 8192³ (798 of 989 TFLOP/s on the H100 machine).
    tflopsPerSm: (0.8 * t.denseBf16Tflops) / t.smCount,
    feedBytesPerUs: 105e3,
    loadLatencyUs: 0.5,
    storeBytesPerUs: SM_STORE_BYTES_PER_US,
    launchUs: 20,
    smCount: t.smCount,
    sharedBytesPerBlock: t.sharedBytesPerBlock,
  };
}

const ELEMENT_BYTES = { bf16: 2, fp16: 2, fp32: 4 } as const;

function bodyOf(name: string): ComputeBody {
  const b = COMPUTE_BODIES.find((x) => x.name === name);
  if (b === undefined)
    throw new TuneError("bad-space", `no compute body "${name}" (there are ${COMPUTE_BODIES.map((x) => x.name).join(", ")})`);
  return b;
}

/** Shared memory of one program (bytes): the operand ring plus the epilogue's staging tile. */
export function computeSharedBytes(c: ComputeConfig, dtype: ComputeProblem["dtype"] = "bf16"): number {
  const e = ELEMENT_BYTES[dtype];
  const ring = c.numStages * (c.BM * c.BK + c.BK * c.BN) * e;
  const epi = bodyOf(c.body).epilogue;
  const staging = epi === "tma" ? c.BM * c.BN * e : epi === "tma-half" ? (c.BM * c.BN * e) / 2 : 0;
  // Barriers and Triton's own scratch: ~1 KiB measured in the sm_90a compiles.
  return ring + staging + 1024;
}

/** Why `c` cannot run (shared memory, registers, wgmma shape), or undefined. */
export function computeMisfit(c: ComputeConfig, dtype: ComputeProblem["dtype"], model: ComputeModel): string | undefined {
  const shared = computeSharedBytes(c, dtype);
  if (shared > model.sharedBytesPerBlock)
    return `needs ${Math.round(shared / 1024)} KiB of shared memory, a block has ${Math.round(model.sharedBytesPerBlock / 1024)} KiB`;
  // fp32 accumulators per thread: beyond 128 of the 255 registers the kernel spills (seen at
  // 128×256 on 4 warps: 6× slower).
  const acc = (c.BM * c.BN) / (32 * c.numWarps);
  if (acc > 128) return `holds ${acc} accumulator registers per thread (more than 128 spill)`;
  if (c.numStages < 2) return "needs at least 2 stages";
  return undefined;
}

/**
 * Predicted time of `c` on `problem` alone (ms): launch plus wave-quantised rounds of one
 * tile (a stream-K body: whole rounds, then its last wave's tiles in pieces along K). A K step costs the slowest of its tensor-core time, its operand feed and the load
 * latency the ring cannot hide (`latency / (stages − 2)`); a tile adds its epilogue and,
 * unless the loop is flattened, the refill of the ring.
 */
export function predictComputeMs(
  problem: ComputeProblem,
  c: ComputeConfig,
  model: ComputeModel = computeModel(),
  options: {
    /** Price a stream-K body's last wave as whole tiles: what its tail schedule saves is the difference. */
    readonly wholeTail?: boolean;
  } = {},
): number {
  const e = ELEMENT_BYTES[problem.dtype];
  const body = bodyOf(c.body);
  const rate = model.tflopsPerSm * 1e6 * (problem.dtype === "fp32" ? 0.5 : 1); // flop per µs
  const mma = (2 * c.BM * c.BN * c.BK) / rate / (shapeEfficiency(c) * (c.numWarps === 8 && c.BM * c.BN <= 128 * 128 ? 0.97 : 1));
  const feed = ((c.BM + c.BN) * c.BK * e) / model.feedBytesPerUs;
  const latency = c.numStages >= 3 ? model.loadLatencyUs / (c.numStages - 2) : 0;
  const step = c.numStages >= 3 ? Math.max(mma, feed, latency) : Math.max(mma, feed) + model.loadLatencyUs;
  const steps = Math.ceil(problem.K / c.BK);
  const store = (c.BM * c.BN * e) / model.storeBytesPerUs;
  const epilogue = body.epilogue === "pointer" ? 2 * store : body.epilogue === "tma-half" ? 1.1 * store : store;
  const refill = body.flatten ? 0 : model.loadLatencyUs;
  const tileUs = steps * step + epilogue + refill;
  const tiles = Math.ceil(problem.M / c.BM) * Math.ceil(problem.N / c.BN);
  const programs = Math.min(model.smCount, tiles);
  // The body's own cut (a piece's fp32 partial costs about what 100 of K costs the tile).
  const { split } = body.tail === "stream-k" && options.wholeTail !== true ? streamKSplit(tiles, programs, problem.K) : { split: 1 };
  if (split < 2) return (model.launchUs + Math.ceil(tiles / programs) * tileUs) * 1e-3;
  // A piece: its share of the K steps, its fp32 partial stored; the last one reads the `split`
  // partials back and stores the tile.
  const partialUs = (c.BM * c.BN * 4) / model.storeBytesPerUs;
  const pieceUs = Math.ceil(steps / split) * step + partialUs + split * partialUs + epilogue + refill;
  return (model.launchUs + Math.floor(tiles / programs) * tileUs + pieceUs) * 1e-3;
}

/**
 * Tensor-core efficiency of a tile's wgmma shape relative to 128×256: narrow tiles issue
 * small instructions that re-read their operands (fitted to tiles-2026-11-22: 128×64 and
 * 64×128 reach ~60% of 128×256 per flop, 128×128 ~95%, 64×256 ~90%).
 */
function shapeEfficiency(c: ComputeConfig): number {
  const small = Math.min(c.BM, c.BN);
  const area = c.BM * c.BN;
  if (small <= 32 || area <= 64 * 64) return 0.4;
  if (area <= 128 * 64) return 0.62;
  if (small === 64) return 0.9;
  if (area <= 128 * 128) return 0.95;
  return 1;
}

/** A configuration the model priced. */
export interface RankedCompute {
  readonly config: ComputeConfig;
  readonly key: string;
  readonly predictedMs: number;
}

/** A readable key, e.g. `gemm_tma_persistent 128x256x64 g8 s3 w8`. */
export function computeKey(c: ComputeConfig): string {
  return `${c.body} ${c.BM}x${c.BN}x${c.BK} g${c.groupM} s${c.numStages} w${c.numWarps}`;
}

/**
 * Every configuration of `space` for `problem`'s role that fits, ranked by the model,
 * fastest first (ties keep the space's order); L2 groupings other than the first are left
 * to measurement (`computeMeasurementSet`).
 */
export function rankComputeConfigs(
  problem: ComputeProblem,
  options: { readonly space?: ComputeSpace; readonly model?: ComputeModel } = {},
): { ranked: RankedCompute[]; pruned: { key: string; reason: string }[] } {
  const space = options.space ?? DEFAULT_COMPUTE_SPACE;
  const model = options.model ?? computeModel();
  for (const [k, v] of Object.entries(problem))
    if (k !== "role" && k !== "dtype" && !(Number.isSafeInteger(v) && (v as number) > 0))
      throw new TuneError("bad-problem", `problem.${k} = ${String(v)}: M, N and K must be positive integers`);
  const groupM = space.groupM[0] ?? 8;
  const ranked: RankedCompute[] = [];
  const pruned: { key: string; reason: string }[] = [];
  for (const body of space.bodies.map(bodyOf).filter((b) => b.role === problem.role)) {
    for (const BM of space.BM)
      for (const BN of space.BN)
        for (const BK of space.BK)
          for (const numStages of space.stages)
            for (const numWarps of space.warps) {
              const config: ComputeConfig = { body: body.name, BM, BN, BK, groupM, numStages, numWarps };
              const key = computeKey(config);
              const misfit = computeMisfit(config, problem.dtype, model);
              if (misfit !== undefined) pruned.push({ key, reason: misfit });
              else ranked.push({ config, key, predictedMs: predictComputeMs(problem, config, model) });
            }
  }
  ranked.sort((a, b) => a.predictedMs - b.predictedMs);
  return { ranked, pruned };
}

/**
 * What a GPU run measures for one problem, about `k` configurations in rank order. The model
 * cannot tell pipeline depths apart once the load latency is hidden, so the ranking is read
 * per kernel shape (body, tile, warps): the best shapes each contribute the shallowest ring
 * the model prices best and one stage deeper; every body variant's best shape is measured (so
 * a variant the model misjudges is still tried); the best `groupVariants` configurations are
 * also measured at the other L2 groupings, which the model does not price.
 */
export function computeMeasurementSet(
  ranked: readonly RankedCompute[],
  k: number,
  options: { readonly groupM?: readonly number[]; readonly groupVariants?: number } = {},
): RankedCompute[] {
  const shapes = new Map<string, RankedCompute[]>();
  for (const r of ranked) {
    const c = r.config;
    const key = `${c.body} ${c.BM}x${c.BN}x${c.BK} w${c.numWarps}`;
    (shapes.get(key) ?? shapes.set(key, []).get(key)!).push(r);
  }
  const picks = (rs: readonly RankedCompute[]): RankedCompute[] => {
    const best = rs[0]!;
    const shallowest = rs
      .filter((r) => r.predictedMs <= best.predictedMs * (1 + 1e-9))
      .reduce((a, b) => (b.config.numStages < a.config.numStages ? b : a));
    const deeper = rs.find((r) => r.config.numStages === shallowest.config.numStages + 1);
    return deeper === undefined ? [shallowest] : [shallowest, deeper];
  };
  const out = new Map<string, RankedCompute>();
  const add = (r: RankedCompute) => out.set(r.key, r);
  for (const rs of shapes.values()) {
    if (out.size >= Math.max(1, k)) break;
    picks(rs).forEach(add);
  }
  for (const body of new Set(ranked.map((r) => r.config.body))) {
    const first = [...shapes.values()].find((rs) => rs[0]!.config.body === body);
    if (first !== undefined) picks(first).forEach(add);
  }
  const groups = options.groupM ?? DEFAULT_COMPUTE_SPACE.groupM;
  const order = [...out.values()].sort((a, b) => a.predictedMs - b.predictedMs);
  for (const r of order.slice(0, options.groupVariants ?? 3)) {
    for (const g of groups.slice(1)) {
      const config = { ...r.config, groupM: g };
      add({ config, key: computeKey(config), predictedMs: r.predictedMs });
    }
  }
  return [...out.values()].sort((a, b) => a.predictedMs - b.predictedMs);
}
