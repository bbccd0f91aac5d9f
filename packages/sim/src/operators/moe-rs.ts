// MoE part 2 (TileLink's GroupGEMM + Scatter + TopK-reduce + ReduceScatter) as ovl builds it:
// every rank computes the weighted slot rows of all T tokens for its I/W slice (the same expert
// blocks everywhere), and each slab of T/W·(1/slabs) tokens is summed over the ranks by its
// owner, which pulls it. Two ways to signal, as `ovl emit moe-rs` compiles them: per tile (the
// compiler's notifies after each tile's stores, a few reducer programs spinning beside the
// producer and pulling the k slot rows of every token) or per launch (the default,
// warp-specialised body: h permuted into block order first, then the producer, a local TopK-sum,
// one notify, and the reducer on every SM pulling token rows).
import { tileMs, hbmPassMs, portGBps, reduceKernelGBps } from "../simulate/cost.js";
import { ranksPerNode } from "../simulate/network.js";
import type { HardwareModel } from "../simulate/hardware.js";
import { resolveHardware } from "../simulate/registry.js";
import { SimulateError } from "../simulate/errors.js";
import { MOE_RS_BODY } from "./calibration.js";
import { type MoeProblem, moeBlocks, moeRouting, checkMoe } from "./moe.js";
import { type OperatorPrediction, operatorPrediction } from "./prediction.js";

/** How the producer signals its slabs (as `MoeRsNotifies` of `@ovl/tlx-emitter`). */
export type MoeRsNotifies = "tile" | "launch";

/** Options of {@link predictMoeRs}. */
export interface MoeRsOptions {
  readonly hardware: HardwareModel | string;
  /** Default `launch` (the default body's). */
  readonly notifies?: MoeRsNotifies;
  /** Slabs each rank owns (the plan's split; default 2, as `ovl emit moe-rs`). */
  readonly slabsPerRank?: number;
  /** Reducer programs of a per-tile operator (default 4, `MOE_RS_DEFAULT_REDUCERS`); per launch it takes every SM. */
  readonly reducers?: number;
}

const BYTES = 2;
const US = 1e-3;

/** The producer alone: launch plus wave-quantised rounds of its tiles over `blocks` expert blocks (ms). */
export function moeRsProducerMs(hw: HardwareModel, p: MoeProblem, blocks: number, notifies: MoeRsNotifies = "launch"): number {
  const body = notifies === "launch" ? MOE_RS_BODY.launch : MOE_RS_BODY.perTile;
  const tiles = blocks * Math.ceil(p.hidden / MOE_RS_BODY.tile.BN);
  return body.launchUs * US + Math.ceil(tiles / hw.smCount) * tileMs(hw, MOE_RS_BODY.tile, p.intermediate / p.world, body.efficiency);
}

/**
 * One owner's pulls of `tokens` token rows of `rowsPerToken` rows each from every rank (its own
 * read locally) and its writes of the summed rows (ms): the remote bytes of its node's ranks over
 * its NVLink port, those of other nodes' ranks (a multi-node model) over its NIC, all bytes
 * through the reducer's `programs` (the rs-reduce calibration), whichever is slowest.
 */
function pullMs(hw: HardwareModel, tokens: number, rowsPerToken: number, hidden: number, world: number, programs: number): number {
  const row = hidden * BYTES;
  const local = ranksPerNode(hw, world);
  const remote = (local - 1) * tokens * rowsPerToken * row;
  const network = (world - local) * tokens * rowsPerToken * row;
  const all = world * tokens * rowsPerToken * row + tokens * row;
  const net = hw.topology?.network;
  const networkMs = network > 0 && net !== undefined ? net.latencyUs * 1e-3 + (network / (net.nicGBps * 1e9)) * 1e3 : 0;
  return Math.max((remote / (portGBps(hw) * 1e9)) * 1e3, networkMs, (all / (reduceKernelGBps(hw, programs) * 1e9)) * 1e3);
}

/**
 * Predict moe-rs at `problem.world` ranks (ms, the slowest rank). Per launch: permute + producer +
 * TopK-sum + notify, then the pulls of token rows on every SM — nothing overlaps within the
 * operator. Per tile: tiles (block-major, n-tiles inner) go to the persistent programs in turn;
 * slab s is complete when the last tile of a block covering it ends (every rank computes the same
 * blocks), and each owner's reducer pulls its slabs' slot rows in order as they complete. The
 * non-overlapped reference is the producer alone (permute and TopK-sum included per launch) plus
 * the pulls alone.
 */
export function predictMoeRs(problem: MoeProblem, options: MoeRsOptions): OperatorPrediction {
  const hw = resolveHardware(options.hardware);
  checkMoe(problem);
  const notifies = options.notifies ?? "launch";
  const spr = options.slabsPerRank ?? 2;
  const { tokens: T, hidden: H, topk: k, world: W } = problem;
  if (!Number.isInteger(spr) || spr < 1 || (T / W) % spr !== 0) {
    throw new SimulateError("bad-problem", `moe-rs slabsPerRank ${spr}: give a positive divisor of the ${T / W} tokens per rank`);
  }
  const blocks = moeBlocks(moeRouting(problem), problem.experts, MOE_RS_BODY.tile.BM);
  const producer = moeRsProducerMs(hw, problem, blocks.length, notifies);
  const ownTokens = T / W;
  const small = MOE_RS_BODY.smallKernelUs * US;
  if (notifies === "launch") {
    const K = problem.intermediate / W;
    const permute = small + hbmPassMs(hw, T * k * K * BYTES, blocks.length * MOE_RS_BODY.tile.BM * K * BYTES);
    const topkSum = small + hbmPassMs(hw, T * k * H * BYTES, T * H * BYTES);
    const compute = permute + producer + topkSum;
    const reduce = (hw.reduceKernel?.launchUs ?? 0) * US + pullMs(hw, ownTokens, 1, H, W, hw.smCount);
    return operatorPrediction("moe-rs", hw.name, W, compute + small + reduce, compute, reduce);
  }
  // Per tile: when each slab completes, then each owner's reducer over its own slabs in order.
  const slabT = ownTokens / spr;
  const nTiles = Math.ceil(H / MOE_RS_BODY.tile.BN);
  const tMs = (producer - MOE_RS_BODY.perTile.launchUs * US) / Math.max(1, Math.ceil((blocks.length * nTiles) / hw.smCount));
  const lanes = new Float64Array(hw.smCount).fill(MOE_RS_BODY.perTile.launchUs * US);
  const ready = new Array<number>(W * spr).fill(0);
  let i = 0;
  for (const b of blocks) {
    let end = 0;
    for (let n = 0; n < nTiles; n++, i++) {
      const lane = i % hw.smCount;
      lanes[lane] = lanes[lane]! + tMs;
      end = Math.max(end, lanes[lane]!);
    }
    for (let s = Math.floor(b.firstToken / slabT); s <= Math.floor(b.lastToken / slabT); s++) ready[s] = Math.max(ready[s]!, end);
  }
  const programs = options.reducers ?? 4;
  const slabPull = pullMs(hw, slabT, k, H, W, programs);
  let overlapped = Math.max(...lanes);
  for (let r = 0; r < W; r++) {
    let t = (hw.reduceKernel?.launchUs ?? 0) * US;
    for (let s = r * spr; s < (r + 1) * spr; s++) t = Math.max(t, ready[s]!) + slabPull;
    overlapped = Math.max(overlapped, t);
  }
  const reduce = (hw.reduceKernel?.launchUs ?? 0) * US + spr * slabPull;
  return operatorPrediction("moe-rs", hw.name, W, overlapped, producer, reduce);
}
