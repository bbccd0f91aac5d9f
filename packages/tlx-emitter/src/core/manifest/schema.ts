// The `ovl.manifest/v1` contract between the emitter and the runner (runtime-py): which
// kernels to load and launch with which arguments, which buffers and signal slots to
// allocate (symmetric or local), which copy-engine ops each rank issues on which stream,
// the reference to check against, and the timing protocol. Plain JSON; the runner
// validates it with the JSON Schema file generated from these zod schemas.
import { ExprSchema, IndexMapSchema } from "@ovl/mapping";
import { z } from "zod";
import { PYTHON_KEYWORDS } from "../writer/identifiers.js";

/** Version tag of the manifest format. */
export const MANIFEST_SCHEMA = "ovl.manifest/v1" as const;

/** A name that is safe to use as a Python identifier (and as a file-name stem). */
export const Identifier = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must match ^[A-Za-z_][A-Za-z0-9_]*$")
  .refine((s) => !PYTHON_KEYWORDS.has(s), "must not be a Python keyword");

const Count = z.number().int().nonnegative();
const Positive = z.number().int().positive();

/** Element types of buffers. `uint32`/`int32` are used for signal slots. */
export const BufferDType = z.enum(["bf16", "fp16", "fp32", "fp8e4m3", "int32", "uint32", "int64"]);
export type BufferDType = z.infer<typeof BufferDType>;

/**
 * A buffer every rank allocates. `symmetric` buffers come from symmetric memory (peers can
 * address them); others are ordinary local allocations. `init` says how the runner fills it
 * before each checked run: `random` (fresh normal values per rank), `zeros`, `poison` (NaN,
 * so an element no kernel wrote fails the check), `keep`, or `routing`: a MoE routing
 * `[tokens, k]` (int32), each token's k distinct experts drawn from `routing.choices`
 * (default every expert of `routing.experts`), the same on every rank, fresh per checked run;
 * or `replicated`: fresh random values as `random`, but the same on every rank (MoE's
 * `topk_weights`).
 */
export const Buffer = z.object({
  name: Identifier,
  shape: z.array(Positive).min(1),
  dtype: BufferDType,
  symmetric: z.boolean(),
  init: z.enum(["random", "zeros", "poison", "keep", "routing", "replicated"]),
  /** With `init: "routing"` (and only then): the experts the routing draws from. */
  routing: z.object({ experts: Positive, choices: z.array(Count).min(1).optional() }).optional(),
});
export type Buffer = z.infer<typeof Buffer>;

/** A contiguous run of `length` elements at element `offset` of `buffer` on rank `rank`. */
export const Segment = z.object({
  buffer: Identifier,
  rank: Count,
  offset: Count,
  length: Positive,
});
export type Segment = z.infer<typeof Segment>;

/**
 * A host-written signal: after the op, the stream writes `epoch` (the launch count, from 1)
 * into slot `slot` of `rank`'s signal buffer. Host writes set rather than add, so a slot
 * written by the host has exactly one writer per launch (arrivals = 1).
 */
export const SignalWrite = z.object({ rank: Count, slot: Count });
export type SignalWrite = z.infer<typeof SignalWrite>;

/**
 * A host-side op on a communication stream (the copy-engine backend):
 * - `copy`: a peer or local copy of a contiguous segment (`cudaMemcpyAsync` on the stream),
 *   optionally followed by a stream-written signal.
 * - `wait`: the stream waits until slot `slot` of rank `rank`'s signal buffer (default: the
 *   issuing rank's own) reaches `epoch × arrivals` (a host-side `rank_wait`), bounded like
 *   every wait. A wait on another rank's slot (a pull that forwards what a peer pulled, as
 *   in a pull ring) reads that rank's symmetric signal buffer through its peer address.
 */
export const HostOp = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("copy"), src: Segment, dst: Segment, signal: SignalWrite.optional() }),
  z.object({ kind: z.literal("wait"), slot: Count, arrivals: Positive, rank: Count.optional() }),
]);
export type HostOp = z.infer<typeof HostOp>;

/** One rank's communication streams, each an ordered list of host ops. */
export const RankHostOps = z.object({
  rank: Count,
  streams: z.array(z.object({ name: Identifier, ops: z.array(HostOp) })),
});
export type RankHostOps = z.infer<typeof RankHostOps>;

/** A per-rank integer table (tile order, wait slots...), uploaded once as a device tensor. */
export const Table = z.object({
  name: Identifier,
  dtype: z.enum(["int32", "int64"]),
  /** `values[rank]`: the table of that rank; every rank's table has the same length. */
  values: z.array(z.array(z.number().int())).min(1),
});
export type Table = z.infer<typeof Table>;

/**
 * A kernel argument, resolved by the runner on each rank:
 * - `buffer`: this rank's buffer (a tensor).
 * - `peer-pointers`: an int64 tensor of every rank's base address of a symmetric buffer.
 * - `table`: this rank's row of a table (a device tensor).
 * - `int`: a literal integer; `rank` / `world`: this rank and the world size.
 * - `epoch-target`: `epoch × arrivals` for the current launch (the monotone-epoch wait target).
 * - `epoch`: the current launch count (from 1).
 * - `epoch-word`: a pointer to this rank's int32 word on the device that holds the current
 *   launch count; the kernel derives its wait targets from it (`load_epoch_target`), so a
 *   launch captured in a CUDA graph stays correct on every replay (the runner advances the
 *   word on the device at the start of each launch).
 * - `timeout-ns`: the bound of every device-side wait.
 * - `error-buffer`: the int32 buffer a timed-out wait records `(1, rank, slot, seen, expected)` in.
 * - `num-programs`: the size of the launch's first grid dimension as the runner resolved it (a
 *   persistent body's tile stride, e.g. the tutorials' `NUM_SMS`; a constexpr where the body
 *   declares it one).
 * - `rows`: the call's row count M, for a manifest whose rows are a run-time argument (`rows`); with
 *   `divisor` (optional, additive), M / divisor (a multiple of the row count's `multiple`, e.g. rows per rank).
 */
export const KernelArg = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("buffer"), name: Identifier }),
  z.object({ kind: z.literal("peer-pointers"), buffer: Identifier }),
  z.object({ kind: z.literal("table"), name: Identifier }),
  z.object({ kind: z.literal("int"), value: z.number().int() }),
  z.object({ kind: z.literal("rank") }),
  z.object({ kind: z.literal("world") }),
  z.object({ kind: z.literal("epoch") }),
  z.object({ kind: z.literal("epoch-target"), arrivals: Positive }),
  z.object({ kind: z.literal("epoch-word") }),
  z.object({ kind: z.literal("timeout-ns") }),
  z.object({ kind: z.literal("error-buffer") }),
  z.object({ kind: z.literal("num-programs") }),
  z.object({ kind: z.literal("rows"), divisor: Positive.optional() }),
]);
export type KernelArg = z.infer<typeof KernelArg>;

/**
 * A kernel template kind: an identifier that may also contain `-` (the template kinds are
 * kebab-case: `ag-gemm-consumer`, `gemm-producer`, `rs-reduce`, `sm-push`, `sm-pull`,
 * `ring-reduce`, `nvshmem-push`). Added so those kinds validate; every identifier is still accepted.
 */
export const TemplateKind = z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]*$/, "must match ^[A-Za-z_][A-Za-z0-9_-]*$");

/**
 * Launch grid: each dimension a number or `num-sms`: the device's multiprocessor count less
 * `reserve` SMs left to kernels that run beside it (at least 1), at most `cap`.
 */
export const GridDim = z.union([
  Positive,
  z.object({ kind: z.literal("num-sms"), cap: Positive.optional(), reserve: z.number().int().nonnegative().optional() }),
]);
export type GridDim = z.infer<typeof GridDim>;

const RelativePath = (ext: string) =>
  z
    .string()
    .regex(new RegExp(`^[A-Za-z0-9_][A-Za-z0-9_./-]*\\.${ext}$`), `a relative .${ext} path`)
    .refine((p) => !p.includes(".."), "must not contain ..");

/**
 * A kernel compiled ahead of time (TLX kernels: the fork that compiles them is not
 * installed where they run). `cubin` and `metadata` are paths relative to the manifest,
 * written by `scripts/tlx-aot-compile.py`; the metadata JSON holds the entry name, shared
 * memory, warps, cluster dims, scratch sizes and the argument layout the launcher packs.
 * Added in place of `source` compilation: the runner loads the cubin through the CUDA
 * driver (`ovl_runtime.cubin`) instead of calling the `@triton.jit` function.
 */
export const Precompiled = z.object({
  target: z.enum(["sm_90a", "sm_100a"]),
  cubin: RelativePath("cubin"),
  metadata: RelativePath("json"),
  /**
   * Optional (additive): the cluster shape the kernel is compiled for (`ctas_per_cga`), e.g.
   * `[2, 1, 1]` for CTA pairs sharing loads by TMA multicast. The metadata's `cluster_dims`
   * must match; the launcher rounds the grid down to whole clusters and to the clusters the
   * GPU holds at once.
   */
  cluster: z.tuple([Positive, Positive, Positive]).optional(),
});
export type Precompiled = z.infer<typeof Precompiled>;

/**
 * The tile program a compiled local body was transformed with (TileLink §4.1's mappings as
 * data): the visit order and the wait (consumer) or notify (producer) slot maps, over
 * `ovl_m` (consumer: m-block) or `ovl_t` (producer: linear tile `m * numPidN + n`) and
 * `ovl_rank`; dynamic maps read the manifest table of the same name. The TLX kernels
 * (`tlx-ag-gemm`, `tlx-ag-gemm-push`, `tlx-gemm-rs`) carry one too, over `ovl_m` in both
 * roles: they visit whole m-blocks, so `order` maps a visit row to an m-block and their one
 * slot map gives an m-block's wait or notify slot. The kernel source prints the same maps;
 * the CPU emulation evaluates them from here.
 */
export const TileProgramSpec = z.object({
  role: z.enum(["consumer", "producer"]),
  order: IndexMapSchema,
  slots: z.array(IndexMapSchema),
  numPidM: Positive,
  numPidN: Positive,
  /**
   * Optional (additive): a consumer that reads its rows through an index table (ag-moe), or
   * a producer that writes them through one (moe-rs). Block m touches the rows
   * `floor(e / divisor)` of the entries `e = rows[m·blockRows + i]` below `limit`; it waits on
   * (notifies) every segment from `segment(first row)` to `segment(last row)` (`segment` over
   * `ovl_row`), and `slots` are then maps over `ovl_seg`. `rows` is the buffer the kernel
   * reads the entries from (written on the device).
   */
  gather: z
    .object({
      rows: Identifier,
      blockRows: Positive,
      divisor: Positive,
      limit: Positive,
      rowCount: Positive,
      segment: IndexMapSchema,
    })
    .optional(),
  /**
   * Optional (additive): a producer with `gather` (moe-rs) notifies segment `s` on rank
   * `owners(s)` (a map over `ovl_seg`) through the signal buffer's peer table.
   */
  owners: IndexMapSchema.optional(),
});
export type TileProgramSpec = z.infer<typeof TileProgramSpec>;

/** Something a kernel needs from the runner beyond a GPU (see `Kernel.requires`). */
export const KernelRequirement = z.enum(["nvshmem"]);
export type KernelRequirement = z.infer<typeof KernelRequirement>;

/**
 * A kernel launch. `source` is a Python file relative to the manifest; `entry` the
 * `@triton.jit` function in it. `template` names the kernel template and its parameters so
 * that the CPU emulation can execute the same tile schedule without a GPU.
 */
export const Kernel = z.object({
  name: Identifier,
  source: z
    .string()
    .regex(/^[A-Za-z0-9_][A-Za-z0-9_./-]*\.py$/, "a relative .py path")
    .refine((p) => !p.includes(".."), "must not contain .."),
  entry: Identifier,
  stream: z.enum(["compute", "comm"]),
  grid: z.array(GridDim).min(1).max(3),
  numWarps: Positive,
  numStages: Positive,
  args: z.array(z.object({ name: Identifier, value: KernelArg })),
  constexprs: z.record(Identifier, z.union([z.number(), z.boolean()])),
  template: z.object({ kind: TemplateKind, params: z.record(Identifier, z.union([z.number(), z.string(), z.boolean()])) }),
  /** Optional (additive): where the ahead-of-time compiled cubin of this kernel lives. */
  precompiled: Precompiled.optional(),
  /** Optional (additive): the tile program of a transformed local body or a TLX kernel. */
  tileProgram: TileProgramSpec.optional(),
  /**
   * Optional (additive): what the runner must provide before it can launch this kernel.
   * `nvshmem`: the kernel calls NVSHMEM's device API (`ovl_runtime.nvshmem`, the `nvshmem`
   * transfer backend): the runner allocates the manifest's symmetric buffers through PyTorch's
   * NVSHMEM symmetric-memory backend, one process per GPU, and launches the kernel with NVSHMEM's
   * device library linked and its module initialised. A runner that cannot refuses the manifest.
   */
  requires: z.array(KernelRequirement).min(1).optional(),
});
export type Kernel = z.infer<typeof Kernel>;

/**
 * What the result is checked against. `operator` is the logical (global) problem; `inputs`
 * and `output` name the buffers holding each rank's shard / result. Thresholds are relative
 * Frobenius errors ‖out − ref‖ / ‖ref‖.
 *
 * `ag-grouped-gemm` (the MoE expert GEMM): `inputs` are `A` [M, K] (row-sharded) and `B`
 * [E, K, N]; `groupTable` names the manifest table (not a buffer) holding the expert of each
 * global m-block, the same row on every rank. Its length L divides M, an m-block is M / L rows,
 * and the reference is `C[rows of mb] = A[rows of mb] @ B[table[mb]]`.
 *
 * `ag-moe` (MoE with routing on the device): `inputs` are `A` [M, K] (the tokens,
 * row-sharded), `B` [E, K, N] and `topk` [M, k] (int32, the same on every rank); the output
 * is [M·k, N] with `C[t·k + j] = A[t] @ B[topk[t, j]]`.
 *
 * `moe-rs` (MoE part 2: GroupGEMM + Scatter + TopK-reduce + ReduceScatter): `M` is the
 * tokens T, `N` the hidden size H, `K` each rank's slice I of the intermediate size;
 * `inputs` are `A` [T·k, I] (each rank's activations, row t·k + j for token t's j-th
 * expert), `B` [E, I, H] (each rank's slice of every expert), `topk` [T, k] (int32) and
 * `weights` [T, k] (fp32), the last two the same on every rank; rank r's output [T/W, H]
 * holds rows `r·T/W…` of `Σ_ranks Σ_j weights[t, j] · (A[t·k + j] @ B[topk[t, j]])`.
 *
 * `ag-attention` (sequence-parallel attention, KV gathered): `inputs` are `Q` [M = S, N = H·D]
 * and `KV` [S, K = 2·Hkv·D] (both row-sharded; KV's row holds K of every kv head, then V),
 * the output O [S, H·D] is row-sharded too, and `attention` states heads, kv heads, head
 * dimension, causality and scale. Query head h reads kv head `h / (H / Hkv)`; causal: the
 * query at global position i attends keys at positions ≤ i.
 */
export const AttentionReference = z.object({
  heads: Positive,
  kvHeads: Positive,
  headDim: Positive,
  causal: z.boolean(),
  scale: z.number().positive(),
});
export type AttentionReference = z.infer<typeof AttentionReference>;

export const Reference = z.object({
  operator: z.enum([
    "ag-gemm",
    "gemm-rs",
    "gemm-ar",
    "all-gather",
    "reduce-scatter",
    "all-reduce",
    "ag-grouped-gemm",
    "ag-moe",
    "moe-rs",
    "ag-attention",
    "a2a-gemm",
    "ag-gemm-silu",
  ]),
  M: Positive,
  N: Positive,
  K: Positive,
  inputs: z.record(Identifier, Identifier),
  output: Identifier,
  /**
   * For row-sharded inputs/outputs with equal shards: the rows each rank holds (rank r holds
   * global rows `r × rowsPerRank` onward). With `rowCounts` instead when M is not a multiple
   * of the world; a reference gives at most one of the two.
   */
  rowsPerRank: Positive.optional(),
  /**
   * For row-sharded inputs/outputs with uneven shards (the balanced partition: the first
   * `M mod world` ranks one row more): the rows of each rank, in rank order, `world` entries
   * summing to M. Rank r holds global rows from `rowCounts[0] + … + rowCounts[r − 1]` onward.
   */
  rowCounts: z.array(Positive).optional(),
  /** ag-grouped-gemm: the table (in `tables`) of the expert of every global m-block. */
  groupTable: Identifier.optional(),
  /** ag-attention: the attention's heads, head dimension, causality and scale. */
  attention: AttentionReference.optional(),
  tolerance: z.number().positive(),
});
export type Reference = z.infer<typeof Reference>;

/** The timing protocol: CUDA events around each launch, median of `reps`, max over ranks. */
export const Timing = z.object({
  warmup: Count,
  reps: Positive,
  checkRuns: Positive,
});
export type Timing = z.infer<typeof Timing>;

/** A copy's source or destination whose offset and length are expressions of the rows (see {@link Rows}). */
export const RowsSegment = z.object({ buffer: Identifier, rank: Count, offset: ExprSchema, length: ExprSchema });
export type RowsSegment = z.infer<typeof RowsSegment>;

/**
 * Optional (additive): a manifest whose row count M is a run-time argument, one compiled operator serving every
 * M of `range` that is a multiple of `multiple`. The manifest's other fields describe it at `at` rows; for
 * another M the runner instantiates them (`instantiateRows`): each buffer of `buffers` gets `buffers[b]` rows,
 * the host ops become `hostOps` evaluated at M, a `rows` kernel argument and `variable` in the kernels' tile
 * programs take M, every tile program has `numPidM` m-blocks, and each table of `tables` gets its per-rank values
 * evaluated at M (its entry count the same at every M). Expressions are `@ovl/mapping`'s, over the
 * variable `variable`. `fallbackBelow`: below this M the runner does not overlap (the operator's plain
 * sequence runs instead), for `fallbackReason`.
 */
export const Rows = z.object({
  variable: Identifier,
  range: z.object({ min: Positive, max: Positive }),
  multiple: Positive,
  at: Positive,
  buffers: z.record(Identifier, ExprSchema),
  hostOps: z.array(
    z.object({
      rank: Count,
      streams: z.array(
        z.object({
          name: Identifier,
          ops: z.array(z.object({ kind: z.literal("copy"), src: RowsSegment, dst: RowsSegment, signal: SignalWrite.optional() })),
        }),
      ),
    }),
  ),
  numPidM: ExprSchema,
  /** Optional (additive): tables whose values depend on M, per rank (e.g. a push kernel's segments). */
  tables: z.record(Identifier, z.array(z.array(ExprSchema))).optional(),
  /**
   * Optional (additive): per kernel (by name), what else of it depends on M: int arguments (`args`, each replacing an
   * `int` argument of that name; the runner does not specialise the kernel on them), grid dimensions (`grid`, replacing
   * numeric ones), template params (`params`, what the emulation reads) and a gathering tile program's `limit` and
   * `rowCount` (`gather`; its `segment` map may use the row variable, bound at M like `order` and `slots`).
   */
  kernels: z
    .record(
      Identifier,
      z.object({
        args: z.record(Identifier, ExprSchema).optional(),
        grid: z.array(ExprSchema).min(1).max(3).optional(),
        params: z.record(Identifier, ExprSchema).optional(),
        gather: z.object({ limit: ExprSchema, rowCount: ExprSchema }).optional(),
      }),
    )
    .optional(),
  fallbackBelow: Positive.optional(),
  fallbackReason: z.string().min(1).optional(),
});
export type Rows = z.infer<typeof Rows>;

/** A complete manifest. */
export const Manifest = z.object({
  $schema: z.literal(MANIFEST_SCHEMA),
  name: Identifier,
  world: Positive,
  /** The operands' element type (`fp8e4m3`: A and B in fp8 with fp32 scales, C bf16). */
  dtype: z.enum(["bf16", "fp16", "fp32", "fp8e4m3"]),
  buffers: z.array(Buffer).min(1),
  /** The signal buffer (a symmetric `uint32`/`int32` buffer in `buffers`) and its slot count. */
  signals: z.object({ buffer: Identifier, slots: Positive, bits: z.union([z.literal(32), z.literal(64)]) }),
  tables: z.array(Table),
  kernels: z.array(Kernel).min(1),
  hostOps: z.array(RankHostOps),
  reference: Reference,
  timing: Timing,
  /** Bound of every wait, device or host side, in nanoseconds. */
  waitTimeoutNs: Positive,
  /** Optional (additive): the rows are a run-time argument (see {@link Rows}). */
  rows: Rows.optional(),
});
export type Manifest = z.infer<typeof Manifest>;
