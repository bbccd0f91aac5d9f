// The nine tile-centric primitives of TileLink Table 3 as plain data: one zod schema per
// primitive, joined in a union discriminated by `primitive`. Schemas check shape only;
// contradictions between fields are the validator's job (see validate/rules.ts).
import { z } from "zod";
import { Identifier, MemoryOrder, Mode, RankRef, Resource, Scope, Side, TileRef } from "./common.js";

// The `add` of a notify: how much one notify adds to its slot per launch.
const Add = z.number().int().min(1);
// A signal slot index in the BlockChannel: the channel f_C(tile) resolves to.
const Slot = z.number().int().nonnegative();

const common = {
  side: Side,
  order: MemoryOrder,
  scope: Scope,
  resource: Resource,
  label: z.string().optional(),
};

/**
 * `producer_tile_notify(tile_id, mode)`: "Mark producer tile done and notify its consumer
 * tile, consumer tile is marked ready when all the producer tiles it depends on are done."
 * Adds `add` to `slot` with release order; `p2p` reaches the rank that owns the tile (`rank`,
 * or the rank map when absent), `broadcast` every rank.
 */
export const ProducerTileNotify = z.strictObject({
  primitive: z.literal("producer_tile_notify"),
  ...common,
  tile: TileRef,
  mode: Mode,
  rank: RankRef.optional(),
  slot: Slot,
  add: Add,
});
/** See {@link ProducerTileNotify}. */
export type ProducerTileNotify = z.infer<typeof ProducerTileNotify>;

/**
 * `consumer_tile_wait(tile_id)`: "Consumer tile is blocked until all its dependent producer
 * tiles done." An acquire wait on the local `slot` until it reaches `epoch × arrivals`.
 */
export const ConsumerTileWait = z.strictObject({
  primitive: z.literal("consumer_tile_wait"),
  ...common,
  tile: TileRef,
  slot: Slot,
});
/** See {@link ConsumerTileWait}. */
export type ConsumerTileWait = z.infer<typeof ConsumerTileWait>;

/**
 * `peer_tile_notify(tile_id, rank)`: "Mark current tile done and notify its peer tiles in
 * another rank." A release add to `slot` on `rank` (`p2p`) or on every rank (`broadcast`).
 */
export const PeerTileNotify = z.strictObject({
  primitive: z.literal("peer_tile_notify"),
  ...common,
  tile: TileRef,
  mode: Mode,
  rank: RankRef.optional(),
  slot: Slot,
  add: Add,
});
/** See {@link PeerTileNotify}. */
export type PeerTileNotify = z.infer<typeof PeerTileNotify>;

/**
 * `peer_tile_wait(tile_id, rank)`: "Block current tile until its peer tile in another rank
 * is done." An acquire wait on the local `slot` that `rank` notifies.
 */
export const PeerTileWait = z.strictObject({
  primitive: z.literal("peer_tile_wait"),
  ...common,
  tile: TileRef,
  rank: RankRef,
  slot: Slot,
});
/** See {@link PeerTileWait}. */
export type PeerTileWait = z.infer<typeof PeerTileWait>;

/**
 * `rank_notify(tile_id, rank)`: "Tell another rank that data at tile_id is ready." Host
 * side: a stream write that adds to `slot` on `rank` once the copies before it on the
 * stream are done (TileLink Figure 6 notifies its own rank's compute stream this way).
 */
export const RankNotify = z.strictObject({
  primitive: z.literal("rank_notify"),
  ...common,
  tile: TileRef,
  mode: Mode,
  rank: RankRef.optional(),
  slot: Slot,
  add: Add,
});
/** See {@link RankNotify}. */
export type RankNotify = z.infer<typeof RankNotify>;

/**
 * `rank_wait(rank)`: "Block current rank until another rank is done." Host side: the
 * stream waits until the local `slot` that `rank` notifies reaches its target.
 */
export const RankWait = z.strictObject({
  primitive: z.literal("rank_wait"),
  ...common,
  rank: RankRef,
  slot: Slot,
});
/** See {@link RankWait}. */
export type RankWait = z.infer<typeof RankWait>;

/**
 * `tile_push_data(tensors, tile_id, data)`: "Send a tile of data to one (p2p) or all the
 * (broadcast) remote tensors." Writes the tile into `tensor` on `rank` (or the rank map's
 * rank when absent) or on every rank.
 */
export const TilePushData = z.strictObject({
  primitive: z.literal("tile_push_data"),
  ...common,
  tensor: Identifier,
  tile: TileRef,
  mode: Mode,
  rank: RankRef.optional(),
});
/** See {@link TilePushData}. */
export type TilePushData = z.infer<typeof TilePushData>;

/**
 * `data = tile_pull_data(tensors, tile_id)`: "Load one (p2p) or all the (broadcast) tiles of
 * data from remote tensors." Reads the tile of `tensor` from `rank` (or the rank map's rank).
 */
export const TilePullData = z.strictObject({
  primitive: z.literal("tile_pull_data"),
  ...common,
  tensor: Identifier,
  tile: TileRef,
  mode: Mode,
  rank: RankRef.optional(),
});
/** See {@link TilePullData}. */
export type TilePullData = z.infer<typeof TilePullData>;

/** One end of a {@link RankCopyData}: a symmetric tensor on a rank. */
export const RankBuffer = z.strictObject({ tensor: Identifier, rank: RankRef });
/** See {@link RankBuffer}. */
export type RankBuffer = z.infer<typeof RankBuffer>;

/**
 * `rank_copy_data(src, dst)`: "Copy data from src rank to dst rank." Host side, on the copy
 * engine; "the data transfer direction [is] indicated by the order of the source and
 * destination pointers", so push and pull are both this primitive. `tile` names the piece
 * copied where it is a tile of a larger tensor.
 */
export const RankCopyData = z.strictObject({
  primitive: z.literal("rank_copy_data"),
  ...common,
  src: RankBuffer,
  dst: RankBuffer,
  tile: TileRef.optional(),
});
/** See {@link RankCopyData}. */
export type RankCopyData = z.infer<typeof RankCopyData>;

/** Any of the nine primitives of TileLink Table 3, discriminated by `primitive`. */
export const Primitive = z.discriminatedUnion("primitive", [
  ProducerTileNotify,
  ConsumerTileWait,
  PeerTileNotify,
  PeerTileWait,
  RankNotify,
  RankWait,
  TilePushData,
  TilePullData,
  RankCopyData,
]);
/** See {@link Primitive}. */
export type Primitive = z.infer<typeof Primitive>;

/** The snake_case name of a primitive, as in TileLink Table 3. */
export type PrimitiveName = Primitive["primitive"];

/** The notify primitives: they add to a signal slot with release order. */
export type NotifyPrimitive = ProducerTileNotify | PeerTileNotify | RankNotify;
/** The wait primitives: they block until a signal slot reaches its target, with acquire order. */
export type WaitPrimitive = ConsumerTileWait | PeerTileWait | RankWait;
/** The data primitives: they move a tile (device) or a buffer (host). */
export type DataPrimitive = TilePushData | TilePullData | RankCopyData;
