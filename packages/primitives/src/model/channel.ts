// The BlockChannel context every primitive runs in (its rank, the world, the signal slots
// and which producer feeds which consumer through them), and the `ovl.primitives/v1`
// program document: a channel plus a list of primitives.
import { z } from "zod";
import { Index, SignalWidth } from "./common.js";
import { Primitive } from "./primitive.js";

/** Version tag of the primitives interchange format. */
export const PRIMITIVES_SCHEMA = "ovl.primitives/v1" as const;

/**
 * A signal slot: a counter of `width` bits in symmetric memory, never reset. Each launch
 * adds `arrivals` to it in total, so launch `k` (1-based) waits for `value >= k × arrivals`
 * (wrap-aware, see `reached`).
 */
export const SignalSlot = z.strictObject({
  index: Index,
  arrivals: z.number().int().min(1),
  width: SignalWidth,
  label: z.string().optional(),
});
/** See {@link SignalSlot}. */
export type SignalSlot = z.infer<typeof SignalSlot>;

/**
 * Which kind of barrier a relation is (TileLink §3.2.1): `producer-consumer` between tiles
 * of two operators on one rank (e.g. AllGather → GEMM), `peer` between tiles of one
 * operator on different ranks, `rank` between the copy engine and compute.
 */
export const RelationKind = z.enum(["producer-consumer", "peer", "rank"]);
/** See {@link RelationKind}. */
export type RelationKind = z.infer<typeof RelationKind>;

/**
 * A producer/consumer relation: the signal slots through which `producer` (a component of
 * the fused kernel, e.g. `"allgather"`) tells `consumer` (e.g. `"gemm"`) that tiles are ready.
 * A slot belongs to at most one relation, so that its `arrivals` count one kind of event.
 */
export const SlotRelation = z.strictObject({
  kind: RelationKind,
  producer: z.string().min(1),
  consumer: z.string().min(1),
  slots: z.array(Index).min(1),
});
/** See {@link SlotRelation}. */
export type SlotRelation = z.infer<typeof SlotRelation>;

/**
 * The context of TileLink's BlockChannel: this rank, the world size, the signal-slot
 * configuration (the channels f_C maps tiles to) and the producer/consumer relations.
 */
export const BlockChannel = z.strictObject({
  rank: Index,
  worldSize: z.number().int().min(1),
  slots: z.array(SignalSlot),
  relations: z.array(SlotRelation),
});
/** See {@link BlockChannel}. */
export type BlockChannel = z.infer<typeof BlockChannel>;

/** A program of primitives on one rank: the `ovl.primitives/v1` interchange document. */
export const PrimitiveProgram = z.strictObject({
  $schema: z.literal(PRIMITIVES_SCHEMA),
  channel: BlockChannel,
  primitives: z.array(Primitive),
});
/** See {@link PrimitiveProgram}. */
export type PrimitiveProgram = z.infer<typeof PrimitiveProgram>;
