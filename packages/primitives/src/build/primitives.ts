// Builders for the nine primitives: camelCase calls shaped like TileLink's, which fill the
// paper's defaults (notify → release, wait → acquire, data → relaxed; gpu scope within a
// GPU, sys across ranks; SMs on the device, the copy engine on the host) and validate.
import type { MemoryOrder, Mode, RankRef, Resource, Scope, TileRef } from "../model/common.js";
import type {
  ConsumerTileWait,
  PeerTileNotify,
  PeerTileWait,
  Primitive,
  PrimitiveName,
  ProducerTileNotify,
  RankCopyData,
  RankNotify,
  RankWait,
  TilePullData,
  TilePushData,
} from "../model/primitive.js";
import { PRIMITIVES } from "../semantics/table.js";
import { assertPrimitive } from "../validate/validate.js";
import { crossesRanks } from "../validate/rules.js";

/** A tile: its grid coordinates (`[tid_m, tid_n]`), or a full {@link TileRef}. */
export type TileInput = readonly number[] | TileRef;
/** A rank: a rank number, or a full {@link RankRef} (relative or mapped). */
export type RankInput = number | RankRef;

/** Overrides every builder accepts; left out, they come from TileLink Table 3. */
export interface PrimitiveOptions {
  /** Memory order; the only valid one is the default (release / acquire / relaxed). */
  readonly order?: MemoryOrder;
  /** Scope; defaults to `gpu` within one GPU and `sys` for anything another rank or the host sees. */
  readonly scope?: Scope;
  /** Hardware unit; defaults to `sm` on the device and `copy-engine` on the host. */
  readonly resource?: Resource;
  /** A free-form name carried into emitted code and reports. */
  readonly label?: string;
}

function tileRef(tile: TileInput): TileRef {
  return Array.isArray(tile) ? { index: [...(tile as readonly number[])] } : { ...(tile as TileRef) };
}

function rankRef(rank: RankInput): RankRef {
  return typeof rank === "number" ? { kind: "absolute", rank } : { ...rank };
}

// Fill side / order / scope / resource from the table, then validate the whole value.
function finish<T extends Primitive>(name: PrimitiveName, fields: Record<string, unknown>, opts: PrimitiveOptions): T {
  const spec = PRIMITIVES[name];
  const draft: Record<string, unknown> = {
    primitive: name,
    side: spec.side,
    order: opts.order ?? spec.order,
    scope: "sys",
    resource: opts.resource ?? { unit: spec.resources[0] },
    ...fields,
  };
  if (opts.label !== undefined) draft.label = opts.label;
  draft.scope = opts.scope ?? (mayCrossRanks(draft as Primitive) ? "sys" : spec.defaultScope);
  return assertPrimitive(draft) as T;
}

// Without the channel a builder cannot tell its own rank, so a producer notify naming an
// absolute rank gets sys scope: wider than needed when the rank is its own, never too narrow.
function mayCrossRanks(p: Primitive): boolean {
  return crossesRanks(p) || (p.primitive === "producer_tile_notify" && p.rank?.kind === "absolute");
}

function withRank(fields: Record<string, unknown>, rank: RankInput | undefined): Record<string, unknown> {
  return rank === undefined ? fields : { ...fields, rank: rankRef(rank) };
}

/**
 * `producer_tile_notify(tile_id, mode)`: mark a producer tile done and notify its consumer
 * tile (release add of `add`, default 1, to `slot`). `mode` defaults to `p2p`; without
 * `rank` the owner comes from the rank map. Scope defaults to `gpu`, or `sys` when the
 * notify broadcasts or names a rank (absolute, or a non-zero relative offset).
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function producerTileNotify(
  args: { tile: TileInput; slot: number; mode?: Mode; rank?: RankInput; add?: number } & PrimitiveOptions,
): ProducerTileNotify {
  const fields = { tile: tileRef(args.tile), mode: args.mode ?? "p2p", slot: args.slot, add: args.add ?? 1 };
  return finish("producer_tile_notify", withRank(fields, args.rank), args);
}

/**
 * `consumer_tile_wait(tile_id)`: block the consumer tile until all its producer tiles are
 * done (acquire wait on `slot`).
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function consumerTileWait(args: { tile: TileInput; slot: number } & PrimitiveOptions): ConsumerTileWait {
  return finish("consumer_tile_wait", { tile: tileRef(args.tile), slot: args.slot }, args);
}

/**
 * `peer_tile_notify(tile_id, rank)`: mark the current tile done and notify its peer tile on
 * `rank` (`p2p`, the default) or on every rank (`broadcast`, no rank).
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function peerTileNotify(
  args: { tile: TileInput; slot: number; rank?: RankInput; mode?: Mode; add?: number } & PrimitiveOptions,
): PeerTileNotify {
  const fields = { tile: tileRef(args.tile), mode: args.mode ?? "p2p", slot: args.slot, add: args.add ?? 1 };
  return finish("peer_tile_notify", withRank(fields, args.rank), args);
}

/**
 * `peer_tile_wait(tile_id, rank)`: block the current tile until its peer tile on `rank` is
 * done.
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function peerTileWait(args: { tile: TileInput; rank: RankInput; slot: number } & PrimitiveOptions): PeerTileWait {
  return finish("peer_tile_wait", { tile: tileRef(args.tile), rank: rankRef(args.rank), slot: args.slot }, args);
}

/**
 * `rank_notify(tile_id, rank)`: tell `rank` that the data at the tile is ready (host-side
 * stream write on the copy-engine stream).
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function rankNotify(
  args: { tile: TileInput; slot: number; rank?: RankInput; mode?: Mode; add?: number } & PrimitiveOptions,
): RankNotify {
  const fields = { tile: tileRef(args.tile), mode: args.mode ?? "p2p", slot: args.slot, add: args.add ?? 1 };
  return finish("rank_notify", withRank(fields, args.rank), args);
}

/**
 * `rank_wait(rank)`: block the current rank's stream until `rank` is done.
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function rankWait(args: { rank: RankInput; slot: number } & PrimitiveOptions): RankWait {
  return finish("rank_wait", { rank: rankRef(args.rank), slot: args.slot }, args);
}

/**
 * `tile_push_data(tensors, tile_id, data)`: send a tile of data to `tensor` on one rank
 * (`p2p`; `rank`, or the rank map when absent) or on every rank (`broadcast`).
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function tilePushData(args: { tensor: string; tile: TileInput; mode?: Mode; rank?: RankInput } & PrimitiveOptions): TilePushData {
  const fields = { tensor: args.tensor, tile: tileRef(args.tile), mode: args.mode ?? "p2p" };
  return finish("tile_push_data", withRank(fields, args.rank), args);
}

/**
 * `data = tile_pull_data(tensors, tile_id)`: load a tile of `tensor` from one rank (`p2p`)
 * or from every rank (`broadcast`).
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function tilePullData(args: { tensor: string; tile: TileInput; mode?: Mode; rank?: RankInput } & PrimitiveOptions): TilePullData {
  const fields = { tensor: args.tensor, tile: tileRef(args.tile), mode: args.mode ?? "p2p" };
  return finish("tile_pull_data", withRank(fields, args.rank), args);
}

/**
 * `rank_copy_data(src, dst)`: copy `src.tensor` on `src.rank` to `dst.tensor` on `dst.rank`
 * with the copy engine; the order of the two gives the direction (push or pull).
 *
 * @throws PrimitiveError when the result contradicts TileLink's semantics.
 */
export function rankCopyData(
  args: {
    src: { tensor: string; rank: RankInput };
    dst: { tensor: string; rank: RankInput };
    tile?: TileInput;
  } & PrimitiveOptions,
): RankCopyData {
  const fields: Record<string, unknown> = {
    src: { tensor: args.src.tensor, rank: rankRef(args.src.rank) },
    dst: { tensor: args.dst.tensor, rank: rankRef(args.dst.rank) },
  };
  if (args.tile !== undefined) fields.tile = tileRef(args.tile);
  return finish("rank_copy_data", fields, args);
}
