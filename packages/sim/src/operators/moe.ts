// MoE part 1 (TileLink's AG + Gather + GroupGEMM): every rank's tokens gathered by a
// push-swizzled AllGather while the grouped GEMM runs over expert blocks of token slots,
// each block waiting on the slabs its token rows come from.
import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import type { CommBackend } from "../simulate/comm.js";
import { type HardwareModel, resolveHardware } from "../simulate/hardware.js";
import { tileMs } from "../simulate/cost.js";
import { SimulateError } from "../simulate/errors.js";
import { MOE_BODY } from "./calibration.js";
import { type OperatorPrediction, operatorPrediction, slabArrivals } from "./prediction.js";

/** An MoE layer's first half: `tokens` of all ranks, hidden `hidden`, `intermediate` split over ranks, `experts`, `topk`. */
export interface MoeProblem {
  readonly tokens: number;
  readonly hidden: number;
  readonly intermediate: number;
  readonly experts: number;
  readonly topk: number;
  readonly world: number;
  /**
   * Expert ids per token (`[tokens][topk]`), `"balanced"` (token t's j-th expert is
   * `(t·k + j) mod E`: every expert the same count) or `"random"` (uniform, seeded; default).
   */
  readonly routing?: "balanced" | "random" | readonly (readonly number[])[];
  /** Seed of the `"random"` routing (default 1). */
  readonly seed?: number;
}

/** One expert block of `BM` token slots: its expert and the first and last token it reads (or -1 when empty). */
export interface MoeBlock {
  readonly expert: number;
  readonly firstToken: number;
  readonly lastToken: number;
}

/** The routing as `[tokens][topk]` expert ids, checked. */
export function moeRouting(p: MoeProblem): number[][] {
  const { tokens, experts: E, topk: k } = p;
  const routing = p.routing ?? "random";
  if (routing === "balanced") return Array.from({ length: tokens }, (_, t) => Array.from({ length: k }, (_, j) => (t * k + j) % E));
  if (routing === "random") {
    let s = (p.seed ?? 1) >>> 0;
    const next = (): number => {
      s = (s + 0x6d2b79f5) >>> 0;
      let x = Math.imul(s ^ (s >>> 15), 1 | s);
      x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
      return ((x ^ (x >>> 14)) >>> 0) / 2 ** 32;
    };
    return Array.from({ length: tokens }, () => {
      const picked = new Set<number>();
      while (picked.size < k) picked.add(Math.floor(next() * E));
      return [...picked];
    });
  }
  if (routing.length !== tokens) throw new SimulateError("bad-problem", `routing has ${routing.length} tokens, problem ${tokens}`);
  routing.forEach((ids, t) => {
    if (ids.length !== k || ids.some((e) => !Number.isInteger(e) || e < 0 || e >= E)) {
      throw new SimulateError("bad-problem", `routing[${t}] = [${ids.join(", ")}]: give ${k} expert ids in 0..${E - 1}`);
    }
  });
  return routing.map((ids) => [...ids]);
}

/** The grouped GEMM's row blocks: token slots grouped by expert (tokens in order), each group padded to whole `BM` blocks. */
export function moeBlocks(routing: readonly (readonly number[])[], experts: number, BM: number): MoeBlock[] {
  const groups: number[][] = Array.from({ length: experts }, () => []);
  routing.forEach((ids, t) => {
    for (const e of ids) groups[e]!.push(t);
  });
  const blocks: MoeBlock[] = [];
  groups.forEach((toks, e) => {
    for (let i = 0; i < toks.length; i += BM) {
      const part = toks.slice(i, i + BM);
      blocks.push({ expert: e, firstToken: part[0]!, lastToken: part[part.length - 1]! });
    }
  });
  return blocks;
}

/** The body alone: launch plus wave-quantised rounds of (block × n-tile) tiles at the calibrated efficiency (ms). */
export function moeComputeMs(hw: HardwareModel, p: MoeProblem, blocks: number): number {
  const tiles = blocks * Math.ceil(p.intermediate / p.world / MOE_BODY.tile.BN);
  return MOE_BODY.launchUs * 1e-3 + Math.ceil(tiles / hw.smCount) * moeTileMs(hw, p);
}

function moeTileMs(hw: HardwareModel, p: MoeProblem): number {
  return tileMs(hw, MOE_BODY.tile, p.hidden, MOE_BODY.efficiency);
}

/**
 * Predict AG + Gather + GroupGEMM: tiles (block-major, n-tiles inner) go to the persistent
 * programs in turn (tile i on program i mod SMs); a tile waits for every slab its block's
 * tokens span (rank q holds tokens `q·T/W … (q+1)·T/W − 1`), and runs slower by
 * `copySlowdown` while copies move. Every rank computes the same blocks against its own
 * expert columns, so the slowest rank is the one whose slabs land last.
 */
export function predictAgMoe(
  problem: MoeProblem,
  options: { readonly hardware: HardwareModel | string; readonly backend?: CommBackend },
): OperatorPrediction {
  const hw = resolveHardware(options.hardware);
  checkMoe(problem);
  const { tokens, hidden, world } = problem;
  const blocks = moeBlocks(moeRouting(problem), problem.experts, MOE_BODY.tile.BM);
  const nTiles = Math.ceil(problem.intermediate / world / MOE_BODY.tile.BN);
  const plan = planSignals(
    allGatherSwizzle({ tensor: { name: "X", shape: [tokens, hidden], dtype: "bf16" }, axis: 0, mesh: [world], split: 1, side: "push" }),
  );
  const backend = options.backend ?? "copy-engine";
  const alone = slabArrivals(plan, "X", hw, backend, false);
  const beside = slabArrivals(plan, "X", hw, backend, true);
  const per = tokens / world;
  const tMs = moeTileMs(hw, problem);
  const slow = hw.contention.copySlowdown;
  let overlapped = 0;
  for (let r = 0; r < world; r++) {
    const arr = beside.arrival[r]!;
    const until = beside.commEnd[r]!;
    const lanes = new Float64Array(hw.smCount).fill(MOE_BODY.launchUs * 1e-3);
    let i = 0;
    for (const b of blocks) {
      let ready = 0;
      for (let q = Math.floor(b.firstToken / per); q <= Math.floor(b.lastToken / per); q++) ready = Math.max(ready, arr[q]!);
      for (let n = 0; n < nTiles; n++, i++) {
        const lane = i % hw.smCount;
        const t = Math.max(lanes[lane]!, ready);
        lanes[lane] = t + (t < until ? tMs * (1 + slow) : tMs);
      }
    }
    overlapped = Math.max(overlapped, ...lanes, until);
  }
  return operatorPrediction("ag-moe", hw.name, world, overlapped, moeComputeMs(hw, problem, blocks.length), Math.max(...alone.commEnd));
}

export function checkMoe(p: MoeProblem): void {
  for (const k of ["tokens", "hidden", "intermediate", "experts", "topk", "world"] as const) {
    if (!Number.isInteger(p[k]) || p[k] <= 0) throw new SimulateError("bad-problem", `moe ${k} = ${p[k]}: give a positive integer`);
  }
  if (p.topk > p.experts) throw new SimulateError("bad-problem", `moe topk ${p.topk} exceeds experts ${p.experts}`);
  if (p.tokens % p.world !== 0 || p.intermediate % p.world !== 0) {
    throw new SimulateError(
      "bad-problem",
      `moe tokens ${p.tokens} and intermediate ${p.intermediate} must be multiples of world ${p.world}`,
    );
  }
}
