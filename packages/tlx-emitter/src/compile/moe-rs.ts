// MoE part 2 (`moe-rs`, TileLink's GroupGEMM + Scatter + TopK-reduce + ReduceScatter): the
// problem's sizes and their checks, as the runner's `ovl_runtime.moe_rs.check_moe_rs` and its
// launches compute them. Tensor-parallel experts: each rank holds `h [T·k, I/W]` and
// `W2 [E, I/W, H]`; the tokens are cut into slabs of `slabT` tokens (a divisor of `T/W`), slab s
// owned by rank `s / slabsPerRank`, one signal slot each; every (block, n-tile) of every rank
// notifies each slab its tokens cover once.
import type { Kernel, KernelArg } from "../manifest/schema.js";
import { EmitError } from "../writer/index.js";
import { checkMoeRouting, type MoeAlignSizes, moeAlignSizes } from "./ag-moe.js";
import type { MoeRouting } from "./operator.js";

/** The problem of a moe-rs operator (`I` is each rank's slice of the intermediate size). */
export interface MoeRsProblem {
  /** Tokens T (all ranks'; `T / world` rows are each rank's output). */
  readonly tokens: number;
  /** Each rank's slice of the intermediate size, the producer's K. */
  readonly inter: number;
  /** Hidden size H, the producer's N and the output's columns. */
  readonly hidden: number;
  readonly world: number;
  /** Tokens per slab (default `T / world`: one slab per rank). */
  readonly slabT?: number;
}

/** The producer's tile and the reducer's token block. */
export interface MoeRsTile {
  readonly BM: number;
  readonly BN: number;
  readonly BK: number;
  /** Tokens of one reducer item (default 16). */
  readonly BT?: number;
}

/** Every size a moe-rs manifest's buffers, grids and signal targets derive from. */
export interface MoeRsSizes {
  readonly tokens: number;
  readonly topk: number;
  readonly experts: number;
  readonly inter: number;
  readonly hidden: number;
  readonly world: number;
  readonly slabT: number;
  /** `T / world`. */
  readonly rowsPerRank: number;
  /** `T / slabT`: signal slots of each rank (only its own slabs' are added to). */
  readonly slabs: number;
  readonly slabsPerRank: number;
  /** Slabs rounded up to a power of two (at least 2): the slab-expect kernel's vector. */
  readonly slabsP2: number;
  /** n-tiles of the producer (`ceil(H / BN)`). */
  readonly nTiles: number;
  /** Notifies one covering block brings a slab per launch: `world · nTiles`. */
  readonly notifiesPerCover: number;
  /** Reducer items of each rank: `slabsPerRank · ceil(slabT / BT) · nTiles`. */
  readonly reduceItems: number;
  /** The routing tables' sizes (as ag-moe's). */
  readonly align: MoeAlignSizes;
}

/** The reducer's token block when the tile names none (as `moe_rs_one_device`'s `block_t`). */
export const MOE_RS_DEFAULT_BT = 16;

const pow2 = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));

function positive(name: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 1) throw new EmitError("bad-param", `moe-rs: ${name} must be a positive integer, got ${v}`);
  return v;
}

function powerOfTwo(name: string, v: number): number {
  positive(name, v);
  if ((v & (v - 1)) !== 0) throw new EmitError("bad-param", `moe-rs: ${name} must be a power of two (a Triton block), got ${v}`);
  return v;
}

/**
 * The sizes of a moe-rs problem, after checking them (before anything is emitted).
 * @throws {EmitError} `bad-param` naming the first fault: a bad routing (`checkMoeRouting`), a
 *   non-positive size, tokens that do not divide evenly over the world, a slab that does not
 *   divide `T / world`, a tile side that is not a power of two.
 */
export function moeRsSizes(problem: MoeRsProblem, moe: MoeRouting | undefined, tile: MoeRsTile): MoeRsSizes {
  const routing = checkMoeRouting(moe);
  const tokens = positive("tokens", problem.tokens);
  const inter = positive("inter (I/W)", problem.inter);
  const hidden = positive("hidden (H)", problem.hidden);
  const world = positive("world", problem.world);
  const BM = powerOfTwo("tile.BM", tile.BM);
  const BN = powerOfTwo("tile.BN", tile.BN);
  powerOfTwo("tile.BK", tile.BK);
  const BT = powerOfTwo("tile.BT", tile.BT ?? MOE_RS_DEFAULT_BT);
  if (tokens % world !== 0)
    throw new EmitError(
      "bad-param",
      `moe-rs: the tokens (${tokens}) must divide evenly over the world (${world}): each rank owns T/W rows`,
    );
  const rowsPerRank = tokens / world;
  const slabT = problem.slabT ?? rowsPerRank;
  if (!Number.isSafeInteger(slabT) || slabT < 1 || rowsPerRank % slabT !== 0)
    throw new EmitError("bad-param", `moe-rs: the slab (${slabT} tokens) must be a positive divisor of T/W = ${rowsPerRank}`);
  const slabs = tokens / slabT;
  const slabsPerRank = rowsPerRank / slabT;
  const nTiles = Math.ceil(hidden / BN);
  return {
    tokens,
    topk: routing.topk,
    experts: routing.experts,
    inter,
    hidden,
    world,
    slabT,
    rowsPerRank,
    slabs,
    slabsPerRank,
    slabsP2: Math.max(2, pow2(slabs)),
    nTiles,
    notifiesPerCover: world * nTiles,
    reduceItems: slabsPerRank * Math.ceil(slabT / BT) * nTiles,
    align: moeAlignSizes(tokens, routing, BM),
  };
}

/**
 * The slabs each valid block of a routing table covers, summed per slab (what `moe_slab_expect`
 * computes on the device): block b's slots ascend, so its tokens span the slabs
 * `slab(first) .. slab(last)`. `sortedIds` holds `numBlocks · blockM` entries, the sentinel
 * `T·k` for padding.
 */
export function slabCover(sortedIds: readonly number[], numBlocks: number, s: MoeRsSizes): number[] {
  const cover = new Array<number>(s.slabs).fill(0);
  const limit = s.tokens * s.topk;
  for (let b = 0; b < numBlocks; b++) {
    const valid = sortedIds.slice(b * s.align.blockM, (b + 1) * s.align.blockM).filter((x) => x < limit);
    if (valid.length === 0) continue;
    const first = Math.floor(Math.floor(Math.min(...valid) / s.topk) / s.slabT);
    const last = Math.floor(Math.floor(Math.max(...valid) / s.topk) / s.slabT);
    for (let x = first; x <= last; x++) cover[x] = (cover[x] ?? 0) + 1;
  }
  return cover;
}

/** Manifest buffers of a moe-rs operator besides the routing tables (`MOE_BUFFERS`) and the signals. */
export const MOE_RS_BUFFERS = {
  h: "moe_h",
  w2: "moe_w2",
  topkWeights: "moe_topk_weights",
  partial: "moe_partial",
  out: "moe_out",
  expect: "moe_slab_expect",
} as const;
/** Template kinds of the runner kernels a moe-rs manifest launches besides the routing. */
export const MOE_RS_KINDS = { expect: "moe-slab-expect", reduce: "moe-topk-reduce-rs" } as const;
/** Blocks `moe_slab_expect` reads per step (`ovl_runtime.moe_rs.EXPECT_STEP`). */
export const MOE_RS_EXPECT_STEP = 16;
/** Programs of the reducer when the options name none (as `moe_rs_one_device`'s `reduce_programs`). */
export const MOE_RS_DEFAULT_REDUCERS = 4;

/**
 * The manifest entries of the slab-expect kernel and the persistent TopK-reduce + ReduceScatter
 * kernel (`ovl_runtime.moe_rs`), with the arguments its one-device launcher passes: the expect
 * kernel on the compute stream after the routing, the reducer on the comm stream.
 * `signals` names the signal buffer; `sortedIds` / `numBlocks` the routing tables' buffers.
 */
export function moeRsRunnerKernels(
  s: MoeRsSizes,
  tile: MoeRsTile,
  source: string,
  tables: { readonly signals: string; readonly sortedIds: string; readonly numBlocks: string },
  reducers: number = MOE_RS_DEFAULT_REDUCERS,
): Kernel[] {
  positive("reducers", reducers);
  const buffer = (name: string): KernelArg => ({ kind: "buffer", name });
  const int = (value: number): KernelArg => ({ kind: "int", value });
  const BT = tile.BT ?? MOE_RS_DEFAULT_BT;
  const params = { experts: s.experts, topk: s.topk, tokens: s.tokens, slabT: s.slabT, world: s.world };
  return [
    {
      name: "moe_slab_expect",
      entry: "moe_slab_expect",
      source,
      stream: "compute",
      grid: [1],
      numWarps: 4,
      numStages: 1,
      args: [
        { name: "sorted_ids", value: buffer(tables.sortedIds) },
        { name: "num_blocks_ptr", value: buffer(tables.numBlocks) },
        { name: "expect_ptr", value: buffer(MOE_RS_BUFFERS.expect) },
        { name: "SLOTS", value: int(s.align.slots) },
        { name: "NOTIFIES", value: int(s.notifiesPerCover) },
        { name: "SLAB_T", value: int(s.slabT) },
        { name: "NUM_SLABS", value: int(s.slabs) },
      ],
      constexprs: { TOP_K: s.topk, BLOCK_M: s.align.blockM, SLABS_P2: s.slabsP2, STEP: MOE_RS_EXPECT_STEP },
      template: { kind: MOE_RS_KINDS.expect, params },
    },
    {
      name: "moe_topk_reduce_rs",
      entry: "moe_topk_reduce_rs",
      source,
      stream: "comm",
      grid: [Math.max(1, Math.min(reducers, s.reduceItems))],
      numWarps: 4,
      numStages: 1,
      args: [
        { name: "partial_ptrs", value: { kind: "peer-pointers", buffer: MOE_RS_BUFFERS.partial } },
        { name: "like_ptr", value: buffer(MOE_RS_BUFFERS.partial) },
        { name: "out_ptr", value: buffer(MOE_RS_BUFFERS.out) },
        { name: "sig_ptr", value: buffer(tables.signals) },
        { name: "expect_ptr", value: buffer(MOE_RS_BUFFERS.expect) },
        { name: "err_ptr", value: { kind: "error-buffer" } },
        { name: "rank", value: { kind: "rank" } },
        { name: "timeout_ns", value: { kind: "timeout-ns" } },
        { name: "N", value: int(s.hidden) },
        { name: "SLAB_T", value: int(s.slabT) },
        { name: "SLABS_PER_RANK", value: int(s.slabsPerRank) },
      ],
      constexprs: {
        TOP_K: s.topk,
        WORLD: s.world,
        BLOCK_T: BT,
        BLOCK_N: tile.BN,
        NUM_PROGRAMS: Math.max(1, Math.min(reducers, s.reduceItems)),
      },
      template: { kind: MOE_RS_KINDS.reduce, params },
    },
  ];
}
