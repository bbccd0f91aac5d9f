// MoE part 1 (TileLink's AG + Gather + GroupGEMM): every rank's tokens gathered by a
// push-swizzled AllGather while the grouped GEMM runs over expert blocks of token slots,
// each block waiting on the slabs its token rows come from.
import { allGatherHierarchical, allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import type { CommBackend } from "../simulate/comm.js";
import type { HardwareModel } from "../simulate/hardware.js";
import { resolveHardware } from "../simulate/registry.js";
import { tileMs } from "../simulate/cost.js";
import { SimulateError } from "../simulate/errors.js";
import { nodesSpanned } from "../simulate/network.js";
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

/** The body's tile and launch: what `ovl emit ag-moe` compiled (its tuned table's entry for the shape). */
export interface MoeTiling {
  readonly BM: number;
  readonly BN: number;
  readonly BK: number;
  readonly stages: number;
  readonly warps: number;
}

/** ag-moe's tile where no tuned entry decides (`MOE_DEFAULT_TILE` of @ovl/tlx-emitter: 128×256×64, 4 stages, 8 warps). */
export const MOE_DEFAULT_TILING: MoeTiling = { BM: 128, BN: 256, BK: 64, stages: 4, warps: 8 };

/**
 * Programs of the body one SM runs at once: as many rings of `stages × (BM·BK + BK·BN)` bf16
 * elements as its shared memory holds and as many `warps`-warp programs as its 64 warps take, at
 * most the calibrated cap (registers bound small tiles too; the cap stands for them).
 */
export function moeProgramsPerSm(t: MoeTiling): number {
  const ring = t.stages * (t.BM * t.BK + t.BK * t.BN) * 2;
  return Math.max(1, Math.min(Math.floor(MOE_BODY.sharedBytesPerSm / ring), Math.floor(64 / t.warps), MOE_BODY.maxProgramsPerSm));
}

/**
 * The body alone (ms): launch, plus rounds of (block × n-tile) tiles over `smCount ×
 * moeProgramsPerSm` slots, each tile taking its time alone at the calibrated efficiency times the
 * programs sharing its SM.
 */
export function moeComputeMs(hw: HardwareModel, p: MoeProblem, blocks: number, tiling: MoeTiling = MOE_DEFAULT_TILING): number {
  checkTiling(tiling);
  const tiles = blocks * Math.ceil(p.intermediate / p.world / tiling.BN);
  const per = moeProgramsPerSm(tiling);
  return MOE_BODY.launchUs * 1e-3 + Math.ceil(tiles / (hw.smCount * per)) * per * moeTileMs(hw, p, tiling);
}

function moeTileMs(hw: HardwareModel, p: MoeProblem, tiling: MoeTiling): number {
  return tileMs(hw, tiling, p.hidden, MOE_BODY.efficiency);
}

function checkTiling(t: MoeTiling): void {
  for (const k of ["BM", "BN", "BK", "stages", "warps"] as const) {
    if (!Number.isInteger(t[k]) || t[k] <= 0) throw new SimulateError("bad-problem", `moe tiling ${k} = ${t[k]}: give a positive integer`);
  }
}

/**
 * Predict AG + Gather + GroupGEMM: tiles (block-major, n-tiles inner) are programs of a
 * non-persistent grid, each taking the first of the `smCount × moeProgramsPerSm` slots to free
 * up; a tile waits (holding its slot) for every slab its block's tokens span (rank q holds
 * tokens `q·T/W … (q+1)·T/W − 1`), and runs slower by `copySlowdown` while copies move. Every
 * rank computes the same blocks against its own expert columns, so the slowest rank is the one
 * whose slabs land last. `tiling`: the body's tile and launch (default `MOE_DEFAULT_TILING`).
 */
export function predictAgMoe(
  problem: MoeProblem,
  options: {
    readonly hardware: HardwareModel | string;
    readonly backend?: CommBackend;
    readonly tiling?: MoeTiling;
    /**
     * The token AllGather: `"flat"` (the push-swizzled one over all ranks) or `"hierarchical"`
     * (inter-node first, pipelined, on mesh `[nodes, gpusPerNode]`). Default: hierarchical when
     * the ranks span nodes of a multi-node model, flat otherwise.
     */
    readonly gather?: "flat" | "hierarchical";
  },
): OperatorPrediction {
  const hw = resolveHardware(options.hardware);
  checkMoe(problem);
  const tiling = options.tiling ?? MOE_DEFAULT_TILING;
  checkTiling(tiling);
  const { tokens, hidden, world } = problem;
  const blocks = moeBlocks(moeRouting(problem), problem.experts, tiling.BM);
  const nTiles = Math.ceil(problem.intermediate / world / tiling.BN);
  const per = moeProgramsPerSm(tiling);
  const X = { name: "X", shape: [tokens, hidden], dtype: "bf16" } as const;
  const G = hw.topology?.gpusPerNode ?? world;
  const spans =
    nodesSpanned(
      hw,
      Array.from({ length: world }, (_, r) => r),
    ) > 1;
  const gather = options.gather ?? (spans ? "hierarchical" : "flat");
  if (gather === "hierarchical" && (!spans || world % G !== 0)) {
    throw new SimulateError("bad-option", `gather "hierarchical" needs ranks on several whole nodes: world ${world}, gpusPerNode ${G}`);
  }
  const plan = planSignals(
    gather === "hierarchical"
      ? allGatherHierarchical({ tensor: X, axis: 0, mesh: [world / G, G], split: 1, schedule: "pipelined", order: "inter-node-first" })
      : allGatherSwizzle({ tensor: X, axis: 0, mesh: [world], split: 1, side: "push" }),
  );
  const backend = options.backend ?? "copy-engine";
  const alone = slabArrivals(plan, "X", hw, backend, false);
  const beside = slabArrivals(plan, "X", hw, backend, true);
  const rows = tokens / world;
  // A slot's tile shares its SM with `per` programs: each runs at 1/per of the SM's rate.
  const tMs = moeTileMs(hw, problem, tiling) * per;
  const slow = hw.contention.copySlowdown;
  let overlapped = 0;
  for (let r = 0; r < world; r++) {
    const arr = beside.arrival[r]!;
    const until = beside.commEnd[r]!;
    const slots = new Float64Array(hw.smCount * per).fill(MOE_BODY.launchUs * 1e-3);
    for (const b of blocks) {
      let ready = 0;
      for (let q = Math.floor(b.firstToken / rows); q <= Math.floor(b.lastToken / rows); q++) ready = Math.max(ready, arr[q]!);
      for (let n = 0; n < nTiles; n++) {
        // The next program takes the slot that frees first.
        let slot = 0;
        for (let j = 1; j < slots.length; j++) if (slots[j]! < slots[slot]!) slot = j;
        const t = Math.max(slots[slot]!, ready);
        slots[slot] = t + (t < until ? tMs * (1 + slow) : tMs);
      }
    }
    overlapped = Math.max(overlapped, ...slots, until);
  }
  const compute = moeComputeMs(hw, problem, blocks.length, tiling);
  return operatorPrediction("ag-moe", hw.name, world, overlapped, compute, Math.max(...alone.commEnd));
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
