// The chunk-plan data model (AutoOverlap §5.1) as zod schemas: the single source of the
// `ovl.chunk-plan/v1` JSON contract. TS types are inferred from these schemas so the
// validator, the JSON Schema file and the types never drift apart.
import { z } from "zod";

/** Version tag of the chunk-plan interchange format. */
export const CHUNK_PLAN_SCHEMA = "ovl.chunk-plan/v1" as const;

/** Element types a tensor can hold, with their sizes in bytes in {@link DTYPE_BYTES}. */
export const DType = z.enum(["bf16", "fp16", "fp32", "fp8e4m3", "fp8e5m2", "int32", "int8"]);
export type DType = z.infer<typeof DType>;

/** Bytes per element of each {@link DType}. */
export const DTYPE_BYTES: Readonly<Record<DType, number>> = {
  bf16: 2,
  fp16: 2,
  fp32: 4,
  fp8e4m3: 1,
  fp8e5m2: 1,
  int32: 4,
  int8: 1,
};

const Count = z.number().int().nonnegative();
const PositiveCount = z.number().int().positive();
const Identifier = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an identifier: letters, digits and _, not starting with a digit");

/**
 * A tensor the plan moves. Every rank holds a buffer of this shape and dtype (symmetric
 * memory); `strides` (in elements) default to row-major contiguous.
 */
export const TensorDecl = z.object({
  name: Identifier,
  shape: z.array(PositiveCount).min(1),
  dtype: DType,
  strides: z.array(PositiveCount).min(1).optional(),
});
export type TensorDecl = z.infer<typeof TensorDecl>;

/** An N-d box over a named tensor: `offsets[d] .. offsets[d] + sizes[d]` on every axis d. */
export const Region = z.object({
  tensor: Identifier,
  offsets: z.array(Count).min(1),
  sizes: z.array(PositiveCount).min(1),
});
export type Region = z.infer<typeof Region>;

/** How values arriving at a destination combine with what is there. */
export const Reduction = z.enum(["sum", "max"]);
export type Reduction = z.infer<typeof Reduction>;

/**
 * What an op waits for before it may start.
 * - `op`: the op at `(rank, stream, index)` has completed.
 * - `compute`: on `rank`, the compute tiles that write `region` are done (a producer
 *   kernel's per-tile event, as in GEMM+ReduceScatter or DistFuse's tile-wise AllReduce).
 */
export const Dependency = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("op"), rank: Count, stream: Count, index: Count }),
  z.object({ kind: z.literal("compute"), rank: Count, region: Region }),
]);
export type Dependency = z.infer<typeof Dependency>;

/**
 * A point-to-point transfer defined on one side only (AutoOverlap §5.1). On rank `r`:
 * `push` reads `src` on `r` and writes `dst` on `peer`; `pull` reads `src` on `peer` and
 * writes `dst` on `r`. With `reduce`, the destination combines instead of being overwritten.
 */
export const P2POp = z.object({
  kind: z.literal("p2p"),
  side: z.enum(["push", "pull"]),
  peer: Count,
  src: Region,
  dst: Region,
  reduce: Reduction.optional(),
  deps: z.array(Dependency).default([]),
  label: z.string().optional(),
});
export type P2POp = z.infer<typeof P2POp>;

/** A copy between two regions of the same rank (with optional reduction). */
export const LocalCopyOp = z.object({
  kind: z.literal("local-copy"),
  src: Region,
  dst: Region,
  reduce: Reduction.optional(),
  deps: z.array(Dependency).default([]),
  label: z.string().optional(),
});
export type LocalCopyOp = z.infer<typeof LocalCopyOp>;

/** The collectives a plan can use directly (realised by a backend's own implementation). */
export const CollectiveKind = z.enum(["all-gather", "reduce-scatter", "all-reduce", "all-to-all"]);
export type CollectiveKind = z.infer<typeof CollectiveKind>;

/**
 * A collective over `ranks`, listed on each participating rank with that rank's `src`
 * and `dst` regions. With `n = ranks.length` and `i` this rank's position in `ranks`:
 * - all-gather: `dst` is `n` slabs of `src`'s size along `axis`; slab `j` receives rank
 *   `ranks[j]`'s `src`.
 * - reduce-scatter: `src` is `n` slabs along `axis`; `dst` (one slab's size) receives the
 *   `reduce` over all ranks of slab `i`.
 * - all-reduce: `dst` (same size as `src`) receives the `reduce` over all ranks' `src`.
 * - all-to-all: `src` and `dst` are `n` slabs along `axis`; slab `j` of `src` goes to slab
 *   `i` of rank `ranks[j]`'s `dst`.
 */
export const CollectiveOp = z.object({
  kind: z.literal("collective"),
  collective: CollectiveKind,
  ranks: z.array(Count).min(1),
  axis: Count,
  src: Region,
  dst: Region,
  reduce: Reduction.optional(),
  deps: z.array(Dependency).default([]),
  label: z.string().optional(),
});
export type CollectiveOp = z.infer<typeof CollectiveOp>;

/** Any op of a plan. */
export const Op = z.discriminatedUnion("kind", [P2POp, LocalCopyOp, CollectiveOp]);
export type Op = z.infer<typeof Op>;

/**
 * A signal slot on a rank (DESIGN.md's epoch model): a counter never reset; launch `k`
 * waits for `value >= k * arrivals`. `purpose` says what completing it means:
 * `chunk-ready` (a destination chunk has arrived), `transit` (a chunk forwarded along a
 * push chain has arrived at an intermediate rank), `tile-done` (compute finished the
 * tiles of a region).
 */
export const SignalSlot = z.object({
  slot: Count,
  arrivals: PositiveCount,
  purpose: z.enum(["chunk-ready", "transit", "tile-done"]),
  region: Region.optional(),
});
export type SignalSlot = z.infer<typeof SignalSlot>;

/** Which signal an op's completion adds to: `(rank, slot)`. */
export const SignalRef = z.object({ rank: Count, slot: Count });
export type SignalRef = z.infer<typeof SignalRef>;

/** One rank's part of a plan: ordered streams of ops, and the regions it holds at start. */
export const RankPlan = z.object({
  rank: Count,
  /** Regions whose contents are valid on this rank before the plan runs (its shards). */
  local: z.array(Region).default([]),
  streams: z.array(z.array(Op)),
});
export type RankPlan = z.infer<typeof RankPlan>;

/**
 * The device mesh: `shape` lists the sizes of its levels, outermost first (`[nodes,
 * gpusPerNode]`); the world size is their product, and rank = row-major index.
 */
export const Mesh = z.object({ shape: z.array(PositiveCount).min(1) });
export type Mesh = z.infer<typeof Mesh>;

/**
 * The collective a plan claims to implement; validation proves it by symbolic execution.
 * `tensor` is the buffer the result lands in, `axis` the sharded axis; for reductions,
 * `src` is the tensor whose per-rank partial values are reduced.
 */
export const Claim = z.object({
  collective: CollectiveKind,
  tensor: Identifier,
  src: Identifier.optional(),
  axis: Count,
  ranks: z.array(Count).min(1),
  reduce: Reduction.optional(),
});
export type Claim = z.infer<typeof Claim>;

/** A chunk plan: per rank, streams of chunk-level ops (AutoOverlap's communication schedule). */
export const ChunkPlan = z.object({
  $schema: z.literal(CHUNK_PLAN_SCHEMA),
  name: z.string().min(1),
  mesh: Mesh,
  tensors: z.array(TensorDecl).min(1),
  claim: Claim.optional(),
  ranks: z.array(RankPlan).min(1),
  /** Signal slots per rank, and per op the signal its completion adds to (see `planSignals`). */
  signals: z
    .object({
      slots: z.array(z.object({ rank: Count, slots: z.array(SignalSlot) })),
      /** `notify[r][s][i]` = the signal that op `i` of stream `s` on rank `r` adds 1 to, or null. */
      notify: z.array(z.array(z.array(SignalRef.nullable()))),
    })
    .optional(),
});
export type ChunkPlan = z.infer<typeof ChunkPlan>;
