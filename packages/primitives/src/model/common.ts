// The vocabulary every primitive shares (TileLink §3.2): which side runs it, its memory
// order and scope, how a notify picks its target ranks, and the tile / rank / resource
// references a primitive carries. Zod schemas are the source of truth; types are inferred.
import { z } from "zod";

/** A non-negative integer: a tile coordinate, a rank, a slot index, a stream index. */
export const Index = z.number().int().nonnegative();

/** A name in emitted Python: letters, digits and `_`, not starting with a digit. */
export const Identifier = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an identifier: letters, digits and _, not starting with a digit");

/**
 * Where a primitive runs. TileLink §3.2: "Each group contains both device-side primitives
 * and host-side primitives"; device-side ones run on the SMs inside a kernel, host-side
 * ones are issued from the host on a stream and drive the copy engine.
 */
export const Side = z.enum(["device", "host"]);
/** See {@link Side}. */
export type Side = z.infer<typeof Side>;

/**
 * The memory order a primitive carries. TileLink §3.2.1: "The notify primitives carry
 * release semantics, ensuring that any memory access occurring before [them] cannot be
 * executed after these notify primitives. Conversely, the wait primitives carry acquire
 * semantics". Data primitives are `relaxed`: the notify that follows them publishes the data.
 */
export const MemoryOrder = z.enum(["release", "acquire", "relaxed"]);
/** See {@link MemoryOrder}. */
export type MemoryOrder = z.infer<typeof MemoryOrder>;

/**
 * The set of threads an ordering is guaranteed to (PTX scopes): `cta` one thread block,
 * `gpu` every thread of one device, `sys` every device and the host. Anything another
 * rank or the host observes needs `sys`.
 */
export const Scope = z.enum(["cta", "gpu", "sys"]);
/** See {@link Scope}. */
export type Scope = z.infer<typeof Scope>;

/**
 * Which ranks a notify or a data primitive reaches. TileLink §3.2.1: "`p2p` means that
 * only one target rank will be notified, which is calculated by the offset of the given
 * tile_id in the global tensor view; `broadcast` means that all the ranks will be notified."
 */
export const Mode = z.enum(["p2p", "broadcast"]);
/** See {@link Mode}. */
export type Mode = z.infer<typeof Mode>;

/**
 * A reference to a rank:
 * - `absolute`: rank number `rank`;
 * - `relative`: `(self + offset) mod worldSize`, the ring neighbours of TileLink's Figure 4
 *   (`to_rank = (rank - 1 + WORLD_SIZE) % WORLD_SIZE` is `offset: -1`);
 * - `mapped`: the rank map f_R named `map` evaluated at the primitive's tile (TileLink §4.1,
 *   static expression or dynamic lookup table, resolved by @ovl/mapping).
 */
export const RankRef = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("absolute"), rank: Index }),
  z.strictObject({ kind: z.literal("relative"), offset: z.number().int() }),
  z.strictObject({ kind: z.literal("mapped"), map: Identifier }),
]);
/** See {@link RankRef}. */
export type RankRef = z.infer<typeof RankRef>;

/**
 * A tile: its coordinates in the tile grid (`[tid_m, tid_n]` in TileLink's figures) and,
 * where the tile's shape range comes from a named shape map f_S, that map's name.
 */
export const TileRef = z.strictObject({
  index: z.array(Index).min(1),
  shapeMap: Identifier.optional(),
});
/** See {@link TileRef}. */
export type TileRef = z.infer<typeof TileRef>;

/**
 * The hardware unit a primitive is bound to (TileLink §3.1, resource binding subspace;
 * AutoOverlap's backends):
 * - `sm`: load/store or atomics from SM threads; `sms` SMs dedicated to communication, or
 *   absent when co-located with compute;
 * - `tma`: the Tensor Memory Accelerator, issued from SMs (`sms` as above);
 * - `copy-engine`: DMA launched from the host on communication stream `stream`.
 */
export const Resource = z.discriminatedUnion("unit", [
  z.strictObject({ unit: z.literal("sm"), sms: z.number().int().positive().optional() }),
  z.strictObject({ unit: z.literal("tma"), sms: z.number().int().positive().optional() }),
  z.strictObject({ unit: z.literal("copy-engine"), stream: Index.optional() }),
]);
/** See {@link Resource}. */
export type Resource = z.infer<typeof Resource>;

/** The hardware units of {@link Resource}. */
export type ResourceUnit = Resource["unit"];

/** Width in bits of a signal counter: 32 within a node, 64 across nodes. */
export const SignalWidth = z.union([z.literal(32), z.literal(64)]);
/** See {@link SignalWidth}. */
export type SignalWidth = z.infer<typeof SignalWidth>;
