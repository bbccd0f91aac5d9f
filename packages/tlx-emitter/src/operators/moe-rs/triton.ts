// MoE part 2 (`moe-rs`, TileLink's GroupGEMM + Scatter + TopK-reduce + ReduceScatter) with the
// routing computed on the device. Tensor-parallel experts: each rank holds `h [T·k, I/W]` and
// `W2 [E, I/W, H]`; the plan is a direct ReduceScatter of the slot rows `[T·k, H]` (each owner
// pulls its shard from every rank), whose chunks are the slabs: slab s (`slabT` tokens, a
// divisor of `T/W`) is owned by rank `s / slabsPerRank` and has one signal slot there. The
// body (ovl's `moe_gemm_scatter` or a user's producer annotated `rows=`) computes each block's
// weighted rows into the symmetric `partial` and, as the compiler inserts, notifies on its
// owner every slab its tokens cover; the owner's reducer pulls a slab's rows from every rank
// once its slot reaches the count `moe_slab_expect` derived from the routing on the device,
// summing each token's k slots (the TopK-reduce fused into the ReduceScatter's pulls). A body
// that reads h in the routing's block order (`blocks=`) gets it filled by `moe_permute_rows`; one
// whose tile loop Triton warp-specialises (the default, `moe_gemm_scatter_ws`) takes no inserted
// notifies and is signalled once per launch by `moe_slab_notify` (`MoeRsNotifies`).
import type { ChunkPlan } from "@ovl/chunk-plan";
import { floorDiv, staticMap, variable, type Expr } from "@ovl/mapping";
import type { EmitResult } from "../../core/result.js";
import { checkDistinctBuffers, SIGNAL_BUFFER, worldOf } from "../../backends/triton/common.js";
import { gemmLaunch, resolveOptions, type ResolvedOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import { checkGemmParams } from "../../backends/triton/kernels/index.js";
import {
  GATHER_VARIABLES,
  parseLocalKernel,
  PEER_SIGNALS_PARAM,
  transformLocalKernel,
  type GatherRows,
  type LocalKernel,
  type LocalKernelOutput,
} from "../../local/index.js";
import { MANIFEST_SCHEMA, type Buffer, type Kernel, type KernelArg, type Manifest } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import { bindGemm } from "../../core/bind.js";
import {
  checkMoeRouting,
  MOE_BUFFERS,
  moeAlignSizes,
  moeBindings,
  routingBuffers,
  routingKernels,
  routingModule,
  type MoeAlignSizes,
} from "../ag-moe/triton.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { RANK_VAR } from "../../schedule/maps.js";
import type { MoeRouting, Operator } from "../../core/operator.js";

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
  /** h in the routing's block order, for a body that reads it so (`blocks=`): filled by `moe_permute_rows`. */
  hBlocks: "moe_h_blocks",
  w2: "moe_w2",
  topkWeights: "moe_topk_weights",
  partial: "moe_partial",
  /** Per launch: each token's k weighted rows summed on the rank that computed them, `[T, H]`, pulled by the owners. */
  partialTok: "moe_partial_tok",
  out: "moe_out",
  expect: "moe_slab_expect",
} as const;
/** Template kinds of the runner kernels a moe-rs manifest launches besides the routing. */
export const MOE_RS_KINDS = {
  expect: "moe-slab-expect",
  reduce: "moe-topk-reduce-rs",
  notify: "moe-slab-notify",
  permute: "moe-permute-rows",
  topkSum: "moe-topk-sum",
} as const;
/** Template kind of the transformed producer body. */
export const LOCAL_MOE_RS_KIND = "local-producer";
/** Blocks `moe_slab_expect` reads per step (`ovl_runtime.moe_rs.EXPECT_STEP`). */
export const MOE_RS_EXPECT_STEP = 16;
/** Programs of the reducer when the options name none: few, since spinning programs must leave the producers room. */
export const MOE_RS_DEFAULT_REDUCERS = 4;

/** The signal slot of a rank's "routing and targets ready" flag: the one after the slabs'. */
export function moeRsReadySlot(s: MoeRsSizes): number {
  return s.slabs;
}

/**
 * The manifest entries of the slab-expect kernel and the persistent TopK-reduce +
 * ReduceScatter kernel (`ovl_runtime.moe_rs`): the expect kernel on the compute stream after
 * the routing adds this launch's notifies per slab to `expect` and then sets the rank's ready
 * slot; the reducer, on the comm stream, waits for that slot (this launch's epoch) before it
 * reads `expect`, then waits on each own slab and pulls it from every rank.
 */
export function moeRsRunnerKernels(
  s: MoeRsSizes,
  tile: MoeRsTile,
  source: string,
  reducers: number = MOE_RS_DEFAULT_REDUCERS,
  notifies: MoeRsNotifies = "tile",
  most: MoeRsSizes = s,
): Kernel[] {
  positive("reducers", reducers);
  const buffer = (name: string): KernelArg => ({ kind: "buffer", name });
  const int = (value: number): KernelArg => ({ kind: "int", value });
  const BT = tile.BT ?? MOE_RS_DEFAULT_BT;
  // Per tile: the reducer spins beside the producers (few programs, comm stream) and pulls every
  // slot row. Per launch: it follows the local TopK-sum on the compute stream (the producer is
  // done, so it takes every SM) and pulls token rows, k times fewer bytes.
  const perTile = notifies === "tile";
  const pulled = perTile ? MOE_RS_BUFFERS.partial : MOE_RS_BUFFERS.partialTok;
  const programs = Math.max(1, Math.min(reducers, most.reduceItems));
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
        { name: "sorted_ids", value: buffer(MOE_BUFFERS.sortedIds) },
        { name: "num_blocks_ptr", value: buffer(MOE_BUFFERS.numBlocks) },
        { name: "expect_ptr", value: buffer(MOE_RS_BUFFERS.expect) },
        { name: "sig_ptr", value: buffer(SIGNAL_BUFFER) },
        { name: "READY_SLOT", value: int(moeRsReadySlot(s)) },
        { name: "SLOTS", value: int(s.align.slots) },
        { name: "NOTIFIES", value: int(perTile ? s.notifiesPerCover : s.world) },
        { name: "SLAB_T", value: int(s.slabT) },
        { name: "NUM_SLABS", value: int(s.slabs) },
      ],
      constexprs: {
        TOP_K: s.topk,
        BLOCK_M: s.align.blockM,
        SLABS_P2: s.slabsP2,
        STEP: MOE_RS_EXPECT_STEP,
        PER_BLOCK: perTile,
      },
      template: { kind: MOE_RS_KINDS.expect, params },
    },
    {
      name: "moe_topk_reduce_rs",
      entry: "moe_topk_reduce_rs",
      source,
      ...(perTile
        ? { stream: "comm" as const, grid: [programs] }
        : { stream: "compute" as const, grid: [{ kind: "num-sms" as const, cap: most.reduceItems }] }),
      numWarps: 4,
      numStages: 1,
      args: [
        { name: "partial_ptrs", value: { kind: "peer-pointers", buffer: pulled } },
        { name: "like_ptr", value: buffer(pulled) },
        { name: "out_ptr", value: buffer(MOE_RS_BUFFERS.out) },
        { name: "sig_ptr", value: buffer(SIGNAL_BUFFER) },
        { name: "expect_ptr", value: buffer(MOE_RS_BUFFERS.expect) },
        { name: "err_ptr", value: { kind: "error-buffer" } },
        { name: "rank", value: { kind: "rank" } },
        { name: "epoch_ptr", value: { kind: "epoch-word" } },
        { name: "timeout_ns", value: { kind: "timeout-ns" } },
        { name: "N", value: int(s.hidden) },
        { name: "SLAB_T", value: int(s.slabT) },
        { name: "SLABS_PER_RANK", value: int(s.slabsPerRank) },
        { name: "READY_SLOT", value: int(moeRsReadySlot(s)) },
        ...(perTile ? [] : [{ name: "NUM_PROGRAMS", value: { kind: "num-programs" as const } }]),
      ],
      constexprs: {
        TOP_K: perTile ? s.topk : 1,
        WORLD: s.world,
        BLOCK_T: BT,
        BLOCK_N: tile.BN,
        ...(perTile ? { NUM_PROGRAMS: programs } : {}),
      },
      template: { kind: MOE_RS_KINDS.reduce, params },
    },
  ];
}

/**
 * How a moe-rs producer signals its slabs: `tile` — the compiler's notifies after each tile's
 * stores (every slab the block covers, on its owner), the reducer spinning beside the producers
 * on the comm stream and pulling every slot row; `launch` — a warp-specialised body, whose tile
 * loop takes no inserted atomics: on the compute stream after it, `moe_topk_sum` sums each
 * token's k rows locally, `moe_slab_notify` adds 1 to every slab on its owner (each slab expects
 * one notify per rank and launch), and the reducer, on every SM, pulls the token rows.
 */
export type MoeRsNotifies = "tile" | "launch";

/** The launch notify (`moe_slab_notify`): one program after the producer, every slab on its owner. */
export function moeRsNotifyKernel(s: MoeRsSizes, source: string): Kernel {
  return {
    name: "moe_slab_notify",
    entry: "moe_slab_notify",
    source,
    stream: "compute",
    grid: [1],
    numWarps: 1,
    numStages: 1,
    args: [
      { name: "sig_ptrs", value: { kind: "peer-pointers", buffer: SIGNAL_BUFFER } },
      { name: "SLABS_PER_RANK", value: { kind: "int", value: s.slabsPerRank } },
      { name: "NUM_SLABS", value: { kind: "int", value: s.slabs } },
    ],
    constexprs: { SLABS_P2: s.slabsP2 },
    template: { kind: MOE_RS_KINDS.notify, params: { slabs: s.slabs, slabsPerRank: s.slabsPerRank } },
  };
}

/** Token rows and columns of one `moe_topk_sum` program. */
export const TOPK_SUM_BLOCK = { BT: 32, BN: 256 } as const;

/**
 * `moe_topk_sum` (per launch): each token's k weighted slot rows summed where they were computed,
 * `partial_tok[t] = Σ_j partial[t·k + j]`, so the owners pull `[T/W, H]` from each rank, not
 * `[T/W · k, H]`. A program per (token block, column block), on the compute stream after the producer.
 */
export function moeTopkSumKernel(s: MoeRsSizes, source: string): Kernel {
  const BN = Math.min(TOPK_SUM_BLOCK.BN, pow2(s.hidden));
  return {
    name: "moe_topk_sum",
    entry: "moe_topk_sum",
    source,
    stream: "compute",
    grid: [Math.ceil(s.tokens / TOPK_SUM_BLOCK.BT) * Math.ceil(s.hidden / BN)],
    numWarps: 4,
    numStages: 1,
    args: [
      { name: "partial_ptr", value: { kind: "buffer", name: MOE_RS_BUFFERS.partial } },
      { name: "out_ptr", value: { kind: "buffer", name: MOE_RS_BUFFERS.partialTok } },
      { name: "T", value: { kind: "int", value: s.tokens } },
      { name: "N", value: { kind: "int", value: s.hidden } },
    ],
    constexprs: { TOP_K: s.topk, BLOCK_T: TOPK_SUM_BLOCK.BT, BLOCK_N: BN },
    template: { kind: MOE_RS_KINDS.topkSum, params: { tokens: s.tokens, topk: s.topk, N: s.hidden } },
  };
}

/** Rows of K one `moe_permute_rows` step copies. */
const PERMUTE_BK = 64;

/** `moe_permute_rows`: h in the routing's block order (`moe_h_blocks`), a program per possible block. */
export function moePermuteKernel(s: MoeRsSizes, source: string): Kernel {
  const buffer = (name: string): KernelArg => ({ kind: "buffer", name });
  return {
    name: "moe_permute_rows",
    entry: "moe_permute_rows",
    source,
    stream: "compute",
    grid: [s.align.maxBlocks],
    numWarps: 4,
    numStages: 1,
    args: [
      { name: "src_ptr", value: buffer(MOE_RS_BUFFERS.h) },
      { name: "dst_ptr", value: buffer(MOE_RS_BUFFERS.hBlocks) },
      { name: "sorted_ids", value: buffer(MOE_BUFFERS.sortedIds) },
      { name: "num_blocks_ptr", value: buffer(MOE_BUFFERS.numBlocks) },
      { name: "SLOTS", value: { kind: "int", value: s.align.slots } },
      { name: "K", value: { kind: "int", value: s.inter } },
    ],
    constexprs: { BLOCK_M: s.align.blockM, BLOCK_K: Math.min(PERMUTE_BK, pow2(s.inter)) },
    template: { kind: MOE_RS_KINDS.permute, params: { slots: s.align.slots, K: s.inter, blockM: s.align.blockM } },
  };
}

/**
 * The emitted module of the runner's moe-rs kernels: they live in the runner, this file names them. With `anyRows`
 * (an operator for every token count) it imports their `_rows` forms, never specialised on the sizes that change with
 * the count, under the same names.
 */
export function moeRsModule(anyRows = false): string {
  const names = ["moe_permute_rows", "moe_slab_expect", "moe_slab_notify", "moe_topk_reduce_rs", "moe_topk_sum"];
  const unspecialised = new Set(["moe_permute_rows", "moe_slab_expect", "moe_topk_reduce_rs", "moe_topk_sum"]);
  const imports = names.map((n) => (anyRows && unspecialised.has(n) ? `${n}_rows as ${n}` : n)).join(", ");
  return [
    '"""MoE part 2\'s runner kernels: moe_permute_rows (h in the routing\'s block order), moe_slab_expect (each',
    "slab's expected notifies, from the routing on the device), moe_topk_sum (a launch's local TopK-reduce),",
    "moe_slab_notify (a launch's notify of every slab) and moe_topk_reduce_rs (each owner's ReduceScatter pulls),",
    "from ovl_runtime.moe_rs.",
    "",
    'Emitted by @ovl/tlx-emitter; the kernels are the runner\'s, so the torch API and a manifest run the same code."""',
    `from ovl_runtime.moe_rs import ${imports}  # noqa: F401`,
    "",
  ].join("\n");
}

/**
 * The slabs of a moe-rs plan: a direct ReduceScatter (each owner pulls its shard) of the slot
 * rows `[T·k, H]` along axis 0, whose chunks are whole tokens; the slab is the chunks' row
 * granularity divided by k.
 * @throws {EmitError} `bad-plan` naming what the plan lacks and the template that has it.
 */
export function moeRsSlabTokens(plan: ChunkPlan, tokens: number, topk: number, hidden: number): number {
  const hint = "build it with reduceScatterDirect({ tensor: [T·k, H], split, afterCompute: true }) from @ovl/chunk-plan";
  const claim = plan.claim;
  if (claim === undefined || claim.collective !== "reduce-scatter" || claim.axis !== 0) {
    const got = claim === undefined ? "claims no collective" : `claims ${claim.collective} along axis ${claim.axis}`;
    throw new EmitError("bad-plan", `a moe-rs plan must claim a reduce-scatter of rows; plan "${plan.name}" ${got}: ${hint}`);
  }
  const tensor = plan.tensors.find((t) => t.name === claim.tensor);
  if (tensor === undefined || tensor.shape[0] !== tokens * topk || tensor.shape[1] !== hidden) {
    throw new EmitError(
      "bad-plan",
      `a moe-rs plan reduces the slot rows [T·k, H] = [${tokens * topk}, ${hidden}]; plan "${plan.name}" reduces ${claim.tensor} [${tensor?.shape.join(", ") ?? "?"}]`,
    );
  }
  const world = worldOf(plan);
  if (claim.ranks?.some((r, i) => r !== i))
    throw new EmitError(
      "bad-plan",
      `a moe-rs plan gives shard r to rank r; plan "${plan.name}" assigns shards to ranks ${claim.ranks.join(", ")}`,
    );
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  let rows = 0;
  for (const r of plan.ranks)
    for (const [si, stream] of r.streams.entries())
      for (const [i, x] of stream.entries()) {
        if (x.kind === "collective" || (x.kind === "p2p" && x.side !== "pull")) {
          const what = x.kind === "p2p" ? `${x.side} p2p op` : `${x.kind} op`;
          throw new EmitError(
            "bad-plan",
            `rank ${r.rank} stream ${si} op ${i} is a ${what}; moe-rs realises a direct ReduceScatter, where each owner pulls its slabs: ${hint}`,
          );
        }
        for (const region of [x.src, x.dst]) rows = gcd(gcd(rows, region.offsets[0] ?? 0), region.sizes[0] ?? 0);
      }
  const perRank = tokens / world;
  if (rows === 0 || rows % topk !== 0 || !Number.isInteger(perRank) || perRank % (rows / topk) !== 0) {
    throw new EmitError(
      "bad-plan",
      `plan "${plan.name}" moves chunks of ${rows} slot rows; moe-rs slabs are whole tokens (multiples of k = ${topk} rows) dividing each rank's ${perRank} tokens`,
    );
  }
  return rows / topk;
}

/**
 * The launch of a warp-specialised body: 4 warps (Triton's Hopper warp specialisation partitions
 * a loop only from 4; it adds its own warp groups, 12 warps in all) and 4 stages unless the
 * options say otherwise.
 */
function warpSpecializedLaunch(o: ResolvedOptions): { numWarps: number; numStages: number } {
  return { numWarps: o.numWarps ?? 4, numStages: o.numStages ?? 4 };
}

/**
 * The body `ovl emit moe-rs` compiles without --kernel: the warp-specialised one, rows read in
 * block order (`kernels/moe_gemm_scatter_ws.py`): emitted, 1.02–1.21× `torch._grouped_mm` at
 * MoE-1…6 on one H100 where the per-tile `moe_gemm_scatter` reached 0.59–0.77×
 * (evidence: `results/runs/moe-ws-h100-2026-11-26`).
 */
export const MOE_RS_DEFAULT_BODY = "moe_gemm_scatter_ws" as const;

/** The tile `ovl emit moe-rs` takes without --tile: the fastest of 64/128 × 128/256 at MoE-1…6 (world 8) on an H200 (evidence: `results/runs/moe-rs-compiled-h200-2026-11-25`). */
export const MOE_RS_DEFAULT_TILE = { BM: 128, BN: 256, BK: 64 } as const;

/** What a moe-rs operator's body, problem and plan resolve to before any size is fixed (`moeRsFront`). */
export interface MoeRsFront {
  readonly moe: MoeRouting;
  readonly o: ResolvedOptions;
  readonly kernel: LocalKernel;
  readonly world: number;
  readonly slabT: number;
  readonly tile: MoeRsTile;
  /** The sizes at the operator's own token count. */
  readonly s: MoeRsSizes;
  readonly notifies: MoeRsNotifies;
}

/**
 * The checked routing, options, body, plan and sizes of `op` at its token count.
 * @throws {EmitError} for a bad routing, sizes or plan, a body that does not scatter through a table.
 */
export async function moeRsFront(op: Operator): Promise<MoeRsFront> {
  const moe = checkMoeRouting(op.moe);
  const o = resolveOptions(op.options ?? {});
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "producer" || kernel.rows === undefined) {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: a moe-rs body is a producer that writes its rows through the routing's index table (# ovl: producer scatter=<partial> rows=<sorted_token_ids>); ${kernel.entry} is not`,
    );
  }
  const { M: T, N: H, K: I } = op.problem;
  const world = worldOf(op.plan);
  const slabT = moeRsSlabTokens(op.plan, T, moe.topk, H);
  const tile = { BM: op.tile.BM, BN: op.tile.BN, BK: op.tile.BK };
  const s = moeRsSizes({ tokens: T, inter: I, hidden: H, world, slabT }, moe, tile);
  // A warp-specialised body takes no per-tile notifies (see transformLocalKernel): one per launch.
  return { moe, o, kernel, world, slabT, tile, s, notifies: kernel.warpSpecialized ? "launch" : "tile" };
}

/** The producer's tile program's maps: segment = slab (over `ovl_row`), its owner, the order and the notified slots. */
export function moeRsProgram(f: MoeRsFront, segment: Expr) {
  const { s } = f;
  const seg = variable(GATHER_VARIABLES.segment, { min: 0, max: s.slabs - 1 });
  return {
    segment: staticMap(segment),
    owners: staticMap(floorDiv(seg, s.slabsPerRank)),
    order: staticMap(variable("ovl_t", { min: 0, max: s.align.maxBlocks * s.nTiles - 1 })),
    slots: f.notifies === "tile" ? [staticMap(seg)] : [],
  };
}

/** What a moe-rs manifest holds at one token count: its buffers, its kernels (the routing first) and its producer's name. */
export interface MoeRsLayout {
  readonly buffers: Buffer[];
  readonly kernels: Kernel[];
  /** The producer's kernel name and source file. */
  readonly producer: string;
  readonly source: string;
}

/** The fixed parts of a moe-rs operator serving many token counts: persistent grids' caps and the reducer's programs. */
export interface MoeRsFixed {
  /** Sizes whose persistent caps every launch takes (those of the most tokens served). */
  readonly most: MoeRsSizes;
  /** The per-tile reducer's programs (those of the fewest tokens served). */
  readonly reducers: number;
}

/**
 * The buffers and kernels of `op` (its front `f`, transformed body `t`, producer program `program`) at the sizes `s`:
 * the per-M compile's at the operator's tokens; the rows compile's at any M (`fixed` its caps, `rows` its inserted
 * row-count argument, `routing` its routing kernels' fixed grid).
 * @throws {EmitError} for a body whose rows are not the routing's index table, colliding buffers.
 */
export function moeRsLayout(
  op: Operator,
  f: MoeRsFront,
  t: LocalKernelOutput,
  program: ReturnType<typeof moeRsProgram>,
  s: MoeRsSizes,
  files: { routing: string; runner: string },
  rows?: { fixed: MoeRsFixed; inserted: Readonly<Record<string, KernelArg>>; programs: number },
): MoeRsLayout {
  const { moe, o, kernel, tile, notifies } = f;
  const { N: H, K: I } = op.problem;
  const T = s.tokens;
  const a = s.align;
  const params = checkGemmParams({ M: a.slots, N: H, K: I, BLOCK_M: tile.BM, BLOCK_N: tile.BN, BLOCK_K: tile.BK, GROUP_M: 1 });
  const blocks = kernel.blocks;
  // The body's A: h in slot order, or (blocks=) in the routing's block order, filled by moe_permute_rows.
  const hBuffer = blocks === undefined ? MOE_RS_BUFFERS.h : MOE_RS_BUFFERS.hBlocks;
  const buffers: Buffer[] = [
    { name: MOE_RS_BUFFERS.h, shape: [a.slots, I], dtype: o.dtype, symmetric: false, init: "random" },
    ...(blocks === undefined
      ? []
      : [{ name: MOE_RS_BUFFERS.hBlocks, shape: [a.maxBlocks * a.blockM, I], dtype: o.dtype, symmetric: false, init: "poison" as const }]),
    { name: MOE_RS_BUFFERS.w2, shape: [moe.experts, I, H], dtype: o.dtype, symmetric: false, init: "random" },
    ...routingBuffers(rows === undefined ? a : { ...a, programs: rows.programs }, moe),
    { name: MOE_RS_BUFFERS.topkWeights, shape: [T, moe.topk], dtype: "fp32", symmetric: false, init: "replicated" },
    // Per tile the owners pull the slot rows; per launch the token rows the local TopK-sum writes.
    { name: MOE_RS_BUFFERS.partial, shape: [a.slots, H], dtype: o.dtype, symmetric: notifies === "tile", init: "poison" },
    ...(notifies === "tile"
      ? []
      : [{ name: MOE_RS_BUFFERS.partialTok, shape: [T, H], dtype: o.dtype, symmetric: true, init: "poison" as const }]),
    { name: MOE_RS_BUFFERS.out, shape: [s.rowsPerRank, H], dtype: o.dtype, symmetric: false, init: "poison" },
    { name: MOE_RS_BUFFERS.expect, shape: [s.slabs], dtype: "int32", symmetric: false, init: "keep" },
    { name: SIGNAL_BUFFER, shape: [s.slabs + 1], dtype: "int32", symmetric: true, init: "zeros" },
  ];
  checkDistinctBuffers(buffers);

  const names = kernel.params.map((p) => p.name);
  const buffer = (name: string) => ({ kind: "arg" as const, arg: { kind: "buffer" as const, name } });
  const byName = {
    ...moeBindings(a, MOE_RS_BUFFERS.w2),
    h_ptr: buffer(MOE_RS_BUFFERS.h),
    h: buffer(MOE_RS_BUFFERS.h),
    topk_weights: buffer(MOE_RS_BUFFERS.topkWeights),
    weights_ptr: buffer(MOE_RS_BUFFERS.topkWeights),
    SLOTS: { kind: "arg" as const, arg: { kind: "int" as const, value: a.slots } },
    ...(blocks === undefined ? {} : { [blocks]: buffer(MOE_RS_BUFFERS.hBlocks) }),
  };
  const own = bindGemm(
    names,
    {
      buffers: { a: hBuffer, b: MOE_RS_BUFFERS.w2, c: MOE_RS_BUFFERS.partial },
      params: { c: kernel.operand },
      ...params,
    },
    { ...Object.fromEntries(Object.entries(byName).filter(([p]) => names.includes(p))), ...op.bind },
  );
  const rowsBinding = own.get(kernel.rows!);
  if (rowsBinding?.kind !== "arg" || rowsBinding.arg.kind !== "buffer" || rowsBinding.arg.name !== MOE_BUFFERS.sortedIds) {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: rows=${kernel.rows} must read the routing's ${MOE_BUFFERS.sortedIds} (name it sorted_token_ids or bind it to that buffer)`,
    );
  }
  const cap = (rows?.fixed.most ?? s).align.maxBlocks * s.nTiles;
  const producer = localKernelEntry(t, {
    name: `${op.name}_producer`,
    kind: LOCAL_MOE_RS_KIND,
    stream: "compute",
    grid: kernel.persistent ? [{ kind: "num-sms", cap }] : [a.maxBlocks * s.nTiles],
    ...(kernel.warpSpecialized ? warpSpecializedLaunch(o) : gemmLaunch(o, params, "registers")),
    own,
    inserted: { [PEER_SIGNALS_PARAM]: { kind: "peer-pointers", buffer: SIGNAL_BUFFER }, [RANK_VAR]: { kind: "rank" }, ...rows?.inserted },
    params: {
      BLOCK_M: tile.BM,
      BLOCK_N: tile.BN,
      body: op.body.path,
      entry: kernel.entry,
      operator: "moe-rs",
      a: hBuffer,
      aLayout: blocks === undefined ? "slots" : "blocks",
      notifies,
      b: MOE_RS_BUFFERS.w2,
      c: MOE_RS_BUFFERS.partial,
      weights: MOE_RS_BUFFERS.topkWeights,
      sortedIds: MOE_BUFFERS.sortedIds,
      expertOfBlock: MOE_BUFFERS.expertOfBlock,
      numBlocks: MOE_BUFFERS.numBlocks,
      experts: moe.experts,
      topk: moe.topk,
      tokens: T,
      N: H,
      K: I,
    },
    tileProgram: {
      role: "producer",
      order: program.order,
      slots: program.slots,
      numPidM: a.maxBlocks,
      numPidN: s.nTiles,
      gather: {
        rows: MOE_BUFFERS.sortedIds,
        blockRows: tile.BM,
        divisor: moe.topk,
        limit: a.slots,
        rowCount: T,
        segment: program.segment,
      },
      owners: program.owners,
    },
  });
  const [expectKernel, reduceKernel] = moeRsRunnerKernels(
    s,
    f.tile,
    files.runner,
    rows?.fixed.reducers ?? MOE_RS_DEFAULT_REDUCERS,
    notifies,
    rows?.fixed.most,
  ) as [Kernel, Kernel];
  const compute = [
    ...(blocks === undefined ? [] : [moePermuteKernel(s, files.runner)]),
    expectKernel,
    producer,
    ...(notifies === "launch" ? [moeTopkSumKernel(s, files.runner), moeRsNotifyKernel(s, files.runner)] : []),
  ];
  const routing = routingKernels(rows === undefined ? a : { ...a, programs: rows.programs }, files.routing);
  return { buffers, kernels: [...routing, ...compute, reduceKernel], producer: producer.name, source: producer.source };
}

/** The manifest of `op` (front `f`) with `layout`, at the layout's token count `s`. */
export function moeRsManifest(op: Operator, f: MoeRsFront, s: MoeRsSizes, layout: MoeRsLayout): Manifest {
  const { o, world } = f;
  return {
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers: layout.buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: s.slabs + 1, bits: 32 },
    tables: [],
    kernels: layout.kernels,
    hostOps: Array.from({ length: world }, (_, rank) => ({ rank, streams: [] })),
    reference: {
      operator: "moe-rs",
      M: s.tokens,
      N: op.problem.N,
      K: op.problem.K,
      inputs: { A: MOE_RS_BUFFERS.h, B: MOE_RS_BUFFERS.w2, topk: MOE_BUFFERS.topkIds, weights: MOE_RS_BUFFERS.topkWeights },
      output: MOE_RS_BUFFERS.out,
      rowsPerRank: s.rowsPerRank,
      tolerance: o.tolerance,
    },
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  };
}

/** The emitted files of a moe-rs operator named `name`. */
export function moeRsFiles(name: string): { routing: string; runner: string } {
  return { routing: `${name}_routing.py`, runner: `${name}_moe_rs.py` };
}

/**
 * Compile a moe-rs operator: `op.problem` is `{ M: tokens T, N: hidden H, K: each rank's
 * intermediate slice I }`, `op.moe` the experts and top-k, `op.plan` a direct ReduceScatter
 * of the slot rows `[T·k, H]` (its chunks give the slabs, `moeRsSlabTokens`), `op.body` a
 * producer annotated `scatter=<partial> rows=<sorted_token_ids>` (ovl's `moe_gemm_scatter`).
 * The manifest launches the routing kernels, `moe_slab_expect`, the transformed body (which
 * notifies each covered slab on its owner) and the reducer on the comm stream.
 * @throws {EmitError} for a bad routing, sizes or plan, a body that does not scatter through
 *   a table; {LocalKernelError} for a body the transformation refuses.
 */
export async function compileMoeRs(op: Operator): Promise<EmitResult> {
  const f = await moeRsFront(op);
  const { s, tile, moe } = f;
  const T = s.tokens;
  // The body's blocks touch token rows `slot // k`; segment = slab, notified on its owner.
  const program = moeRsProgram(f, floorDiv(variable(GATHER_VARIABLES.row, { min: 0, max: T - 1 }), f.slabT));
  const gather: GatherRows = {
    blockRows: tile.BM,
    divisor: moe.topk,
    limit: s.align.slots,
    rowCount: T,
    segment: program.segment,
    segmentCount: s.slabs,
  };
  const t = transformLocalKernel(f.kernel, {
    role: "producer",
    order: program.order,
    slots: program.slots,
    numPidN: s.nTiles,
    tables: [],
    gather,
    owners: program.owners,
  });
  const files = moeRsFiles(op.name);
  const layout = moeRsLayout(op, f, t, program, s, files);
  return {
    files: [
      { path: files.routing, text: routingModule() },
      { path: files.runner, text: moeRsModule() },
      { path: layout.source, text: t.source },
    ],
    manifest: validated(moeRsManifest(op, f, s, layout)),
  };
}
