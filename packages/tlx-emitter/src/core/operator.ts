// An overlapped operator (the unit the CLI, the tuner, the bench and users compile): a
// compute body — a local Triton kernel, the user's own or a built-in — plus the chunk plan
// of its communication plus the backend choices.
import type { ChunkPlan } from "@ovl/chunk-plan";
import type { EmitOptions } from "./options.js";
import type { Binding } from "./bind.js";

/** The operators the compiler builds: what the body computes and which way data moves. */
export type OperatorKind =
  | "ag-gemm"
  | "gemm-rs"
  | "ag-grouped-gemm"
  | "gemm-ar"
  | "ag-moe"
  | "moe-rs"
  | "ag-attention"
  | "a2a-gemm"
  | "ag-gemm-silu";

/** A local kernel: its file name (for errors and provenance) and its Python text. */
export interface KernelBody {
  /** File name the body was read from, as errors should cite it (e.g. `my_matmul.py`). */
  readonly path: string;
  /** The module's text. */
  readonly source: string;
  /** The annotated `@triton.jit` function to transform (default: the one with an `# ovl:` role). */
  readonly entry?: string;
}

/** Problem sizes of the GEMM `C[M,N] = A[M,K] @ B[K,N]` (global M: all ranks' rows). */
export interface GemmProblem {
  readonly M: number;
  readonly N: number;
  readonly K: number;
}

/**
 * The MoE routing of a grouped GEMM: A's rows are grouped contiguously by expert, each group
 * padded to BLOCK_M rows, so every global m-block belongs to one expert.
 */
export interface ExpertRouting {
  /** Number of experts E (B is `[E, K, N]`); an expert may have no m-block. */
  readonly experts: number;
  /** `mblockExpert[mb]`: the expert of global m-block `mb` (`M / BLOCK_M` entries, each in `[0, E)`). */
  readonly mblockExpert: readonly number[];
}

/**
 * The MoE routing of an ag-moe operator: how many experts and how many per token. The routing
 * itself (`topk_ids`) is an input computed on the device; a checked run draws a fresh one.
 */
export interface MoeRouting {
  /** Number of experts E (the weights are `[E, K, N]`). */
  readonly experts: number;
  /** Experts per token k (`topk_ids` is `[M, k]`, C `[M·k, N]`); at most E. */
  readonly topk: number;
  /** The experts a checked run's random routing draws from (default all): a subset leaves the others without tokens. */
  readonly choices?: readonly number[];
}

/** The attention an `ag-attention` operator computes: `O = softmax(Q Kᵀ · scale) V` over the whole sequence. */
export interface AttentionProblem {
  /** Global sequence length S (every rank holds S / world positions). */
  readonly S: number;
  /** Query heads H. */
  readonly heads: number;
  /** Key/value heads Hkv (H a multiple of it: MHA when equal, GQA otherwise). */
  readonly kvHeads: number;
  /** Head dimension D. */
  readonly headDim: number;
  /** Query at global position i attends keys at positions ≤ i. */
  readonly causal: boolean;
  /** Softmax scale (default 1 / √D). */
  readonly scale?: number;
}

/** An overlapped operator, everything `compile()` needs. */
export interface Operator {
  /** Manifest name (an identifier). */
  readonly name: string;
  readonly kind: OperatorKind;
  /** The communication: an AllGather of the body's gathered operand (ag-gemm, ag-grouped-gemm), a ReduceScatter (gemm-rs) or an AllReduce (gemm-ar) of its output. */
  readonly plan: ChunkPlan;
  /** The compute body (see `builtinBody` for ovl's own). */
  readonly body: KernelBody;
  readonly problem: GemmProblem;
  /** The body's tile (`BLOCK_M`, `BLOCK_N`, `BLOCK_K`). */
  readonly tile: { readonly BM: number; readonly BN: number; readonly BK: number };
  /** L2 grouping of the body's persistent loop (default 8). */
  readonly groupM?: number;
  /** ag-grouped-gemm only (required there): the expert of every global m-block. */
  readonly groups?: ExpertRouting;
  /**
   * ag-moe and moe-rs only (required there): experts and top-k. ag-moe's `problem` is
   * `{ M: tokens, N: intermediate, K: hidden }`; moe-rs's `{ M: tokens, N: hidden, K: intermediate per rank }`.
   */
  readonly moe?: MoeRouting;
  /**
   * ag-attention only (required there): the attention computed; `problem` is then its GEMM
   * view (`attentionGemmView`) and `tile` is `{ BM: query rows, BN: kv rows, BK: head dim }`.
   */
  readonly attention?: AttentionProblem;
  /** Bindings of body parameters the compiler cannot infer from their names. */
  readonly bind?: Readonly<Record<string, Binding>>;
  /** Element type, transfers (`copy-engine` | `sm`), launch and timing options. */
  readonly options?: EmitOptions;
  /**
   * TLX backend only: how the warp-specialised GEMM's two consumer warp groups share tiles
   * (`cooperative`: half of every tile each; `pingpong`: whole tiles in turn), its ring
   * depth and the epilogue's column slices. The tuned table's TLX entry fills
   * it when the operator names no tile; default cooperative, the deepest ring up to 4 that fits (`defaultStages`).
   */
  readonly warpSpecialization?: WarpSpecialization;
  /**
   * Compile one operator for every row count of a range, M a run-time argument (`ag-gemm` on the Triton backend):
   * the manifest's `rows` section says how to make it concrete at each M. Without it the operator is compiled
   * for `problem.M` alone.
   */
  readonly rows?: RowsRequest;
}

/** What a rows-generic AllGather+GEMM or GEMM+ReduceScatter is compiled for, the rows an operator serves when M is a run-time argument (`Operator.rows`). */
export interface RowsRequest {
  /** Smallest and largest M served (multiples of the world; default from `minRowsPerRank` to 32768 rows). */
  readonly min?: number;
  readonly max?: number;
  /** Chunks per rank's shard or slab (default 2). */
  readonly split?: number;
  /** Below this M the runner does not overlap, and says so with `fallbackReason`. */
  readonly fallbackBelow?: number;
  readonly fallbackReason?: string;
}

/**
 * Who notifies a tile's tile-done slot: `consumers` (the warp groups that stored it, a release
 * add a tile later), `producer` (the TMA producer warp group, told through mbarriers) or `tma`
 * (the consumers, by a TMA reduce-add: no fence in any thread).
 */
export const TLX_NOTIFIERS = ["consumers", "producer", "tma"] as const;
export type TlxNotifier = (typeof TLX_NOTIFIERS)[number];

/** The TLX GEMM's consumer schedule and ring (see `Operator.warpSpecialization`). */
export interface WarpSpecialization {
  readonly consumerSchedule: "cooperative" | "pingpong";
  readonly stages?: number;
  readonly epilogueSplit?: number;
  /** GEMM+RS: who issues the tile-done notifies: the consumers (default), the producer warp group, or the consumers by TMA reduce-add. */
  readonly notifier?: TlxNotifier;
  /** Cooperative consumers: CTAs per cluster along M sharing B blocks by TMA multicast (1 or 2; default 1; `TlxEmitOptions.clusterM`). */
  readonly clusterM?: number;
}

/**
 * An operator as `compile()` takes it: `tile` may be left out, and then the tuned
 * configuration of its shape decides tile, L2 grouping, warps, stages and the built-in body
 * variant (`resolveCompute`).
 */
export type OperatorInput = Omit<Operator, "tile"> & { readonly tile?: Operator["tile"] };

/** L2 grouping of a body's persistent loop when the operator names none. */
export const DEFAULT_GROUP_M = 8;

/** The tile of an operator that names none and has no tuned entry (measured best of one fixed tile on H200). */
export const DEFAULT_TILE = { BM: 128, BN: 256, BK: 64 } as const;
