// TileLink Table 3 as data: for each primitive, its side, the memory order it carries, its
// default scope, whether it takes a mode and a target rank, and the hardware units it may
// be bound to. Builders read defaults from here and the validator reads the rules.
import type { MemoryOrder, ResourceUnit, Scope, Side } from "../model/common.js";
import type { PrimitiveName } from "../model/primitive.js";

/** What a primitive does: add to a signal, wait on one, or move data. */
export type PrimitiveRole = "notify" | "wait" | "data";

/** The fixed semantics of one primitive of TileLink Table 3. */
export interface PrimitiveSpec {
  /** The snake_case name of Table 3. */
  readonly name: PrimitiveName;
  /** `signal` primitives manage barriers, `data` primitives move tiles (§3.2). */
  readonly group: "signal" | "data";
  /** Notify (release), wait (acquire) or data (relaxed). */
  readonly role: PrimitiveRole;
  /** Where it runs: device primitives on SMs, host primitives drive the copy engine. */
  readonly side: Side;
  /** The one memory order it may carry: "notify primitives carry release semantics ... wait primitives carry acquire semantics". */
  readonly order: MemoryOrder;
  /** Scope the builders fill in when the caller gives none. */
  readonly defaultScope: Scope;
  /** Whether it always involves another rank or the host, so that only `sys` scope orders it. */
  readonly crossRank: boolean;
  /** Whether it takes a `mode` (`p2p` / `broadcast`). */
  readonly takesMode: boolean;
  /** For `p2p` or rank-targeted use: the rank is `required`, `optional` (rank map when absent) or not taken. */
  readonly rank: "required" | "optional" | "none";
  /** The hardware units it may be bound to; the first is the default. */
  readonly resources: readonly [ResourceUnit, ...ResourceUnit[]];
  /** The call form of Table 3. */
  readonly usage: string;
  /** The explanation of Table 3, verbatim. */
  readonly explanation: string;
}

/** The nine primitives of TileLink Table 3, keyed by name. */
export const PRIMITIVES: Readonly<Record<PrimitiveName, PrimitiveSpec>> = {
  producer_tile_notify: {
    name: "producer_tile_notify",
    group: "signal",
    role: "notify",
    side: "device",
    order: "release",
    defaultScope: "gpu",
    crossRank: false,
    takesMode: true,
    rank: "optional",
    resources: ["sm"],
    usage: "producer_tile_notify(tile_id, mode)",
    explanation:
      "Mark producer tile done and notify its consumer tile, consumer tile is marked ready when all the producer tiles it depends on are done",
  },
  consumer_tile_wait: {
    name: "consumer_tile_wait",
    group: "signal",
    role: "wait",
    side: "device",
    order: "acquire",
    defaultScope: "gpu",
    crossRank: false,
    takesMode: false,
    rank: "none",
    resources: ["sm"],
    usage: "consumer_tile_wait(tile_id)",
    explanation: "Consumer tile is blocked until all its dependent producer tiles done",
  },
  peer_tile_notify: {
    name: "peer_tile_notify",
    group: "signal",
    role: "notify",
    side: "device",
    order: "release",
    defaultScope: "sys",
    crossRank: true,
    takesMode: true,
    rank: "required",
    resources: ["sm"],
    usage: "peer_tile_notify(tile_id, rank)",
    explanation: "Mark current tile done and notify its peer tiles in another rank",
  },
  peer_tile_wait: {
    name: "peer_tile_wait",
    group: "signal",
    role: "wait",
    side: "device",
    order: "acquire",
    defaultScope: "sys",
    crossRank: true,
    takesMode: false,
    rank: "required",
    resources: ["sm"],
    usage: "peer_tile_wait(tile_id, rank)",
    explanation: "Block current tile until its peer tile in another rank is done",
  },
  rank_notify: {
    name: "rank_notify",
    group: "signal",
    role: "notify",
    side: "host",
    order: "release",
    defaultScope: "sys",
    crossRank: true,
    takesMode: true,
    rank: "required",
    resources: ["copy-engine"],
    usage: "rank_notify(tile_id, rank)",
    explanation: "Tell another rank that data at tile_id is ready",
  },
  rank_wait: {
    name: "rank_wait",
    group: "signal",
    role: "wait",
    side: "host",
    order: "acquire",
    defaultScope: "sys",
    crossRank: true,
    takesMode: false,
    rank: "required",
    resources: ["copy-engine"],
    usage: "rank_wait(rank)",
    explanation: "Block current rank until another rank is done",
  },
  tile_push_data: {
    name: "tile_push_data",
    group: "data",
    role: "data",
    side: "device",
    order: "relaxed",
    defaultScope: "sys",
    crossRank: true,
    takesMode: true,
    rank: "optional",
    resources: ["sm", "tma"],
    usage: "tile_push_data(tensors, tile_id, data)",
    explanation: "Send a tile of data to one (p2p) or all the (broadcast) remote tensors",
  },
  tile_pull_data: {
    name: "tile_pull_data",
    group: "data",
    role: "data",
    side: "device",
    order: "relaxed",
    defaultScope: "sys",
    crossRank: true,
    takesMode: true,
    rank: "optional",
    resources: ["sm", "tma"],
    usage: "data = tile_pull_data(tensors, tile_id)",
    explanation: "Load one (p2p) or all the (broadcast) tiles of data from remote tensors",
  },
  rank_copy_data: {
    name: "rank_copy_data",
    group: "data",
    role: "data",
    side: "host",
    order: "relaxed",
    defaultScope: "sys",
    crossRank: true,
    takesMode: false,
    rank: "required",
    resources: ["copy-engine"],
    usage: "rank_copy_data(src, dst)",
    explanation: "Copy data from src rank to dst rank",
  },
};

/** The names of the nine primitives, in the order of TileLink Table 3. */
export const PRIMITIVE_NAMES: readonly PrimitiveName[] = [
  "producer_tile_notify",
  "consumer_tile_wait",
  "peer_tile_notify",
  "peer_tile_wait",
  "rank_notify",
  "rank_wait",
  "tile_push_data",
  "tile_pull_data",
  "rank_copy_data",
];
