// fast-check generators for the property tests: consistent BlockChannels, and primitives
// built by the public builders with any option the semantics allow on that channel.
import fc from "fast-check";
import { allocateSlots, blockChannel } from "../src/build/channel.js";
import {
  consumerTileWait,
  peerTileNotify,
  peerTileWait,
  producerTileNotify,
  rankCopyData,
  rankNotify,
  rankWait,
  tilePullData,
  tilePushData,
  type TileInput,
} from "../src/build/primitives.js";
import type { RankRef, Resource, Scope, SignalWidth } from "../src/model/common.js";
import type { BlockChannel, RelationKind } from "../src/model/channel.js";
import type { Primitive } from "../src/model/primitive.js";

/** A channel with one relation of each kind, 1..3 slots each. */
export const channelArb: fc.Arbitrary<BlockChannel> = fc
  .record({
    worldSize: fc.integer({ min: 1, max: 8 }),
    rankSeed: fc.nat(),
    sizes: fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 })),
    arrivals: fc.integer({ min: 1, max: 8 }),
    width: fc.constantFrom<SignalWidth>(32, 64),
  })
  .map(({ worldSize, rankSeed, sizes, arrivals, width }) => {
    let channel = blockChannel({ rank: rankSeed % worldSize, worldSize });
    const kinds: RelationKind[] = ["producer-consumer", "peer", "rank"];
    kinds.forEach((kind, i) => {
      channel = allocateSlots(channel, { kind, producer: `p${i}`, consumer: `c${i}`, count: sizes[i] ?? 1, arrivals, width }).channel;
    });
    return channel;
  });

function slotsOf(channel: BlockChannel, kind: RelationKind): number[] {
  return channel.relations.find((r) => r.kind === kind)?.slots ?? [];
}

const tileArb: fc.Arbitrary<TileInput> = fc.oneof(
  fc.array(fc.nat({ max: 64 }), { minLength: 1, maxLength: 3 }),
  fc.record({ index: fc.array(fc.nat({ max: 64 }), { minLength: 1, maxLength: 3 }), shapeMap: fc.constant("f_S") }),
);

function rankArb(channel: BlockChannel): fc.Arbitrary<RankRef> {
  return fc.oneof(
    fc.nat({ max: channel.worldSize - 1 }).map((rank): RankRef => ({ kind: "absolute", rank })),
    fc.integer({ min: -8, max: 8 }).map((offset): RankRef => ({ kind: "relative", offset })),
    fc.constant<RankRef>({ kind: "mapped", map: "f_R" }),
  );
}

const labelArb = fc.option(fc.string({ maxLength: 8 }), { nil: undefined });
const deviceSignalResource = fc.constantFrom<Resource>({ unit: "sm" }, { unit: "sm", sms: 20 });
const deviceDataResource = fc.constantFrom<Resource>({ unit: "sm" }, { unit: "sm", sms: 20 }, { unit: "tma" }, { unit: "tma", sms: 4 });
const hostResource = fc.constantFrom<Resource>({ unit: "copy-engine" }, { unit: "copy-engine", stream: 1 });
const anyScope = fc.option(fc.constantFrom<Scope>("cta", "gpu", "sys"), { nil: undefined });
const sysOrDefault = fc.option(fc.constant<Scope>("sys"), { nil: undefined });

// Builders take optional fields; leave them out rather than passing undefined.
function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

function isSelf(ref: RankRef | undefined, channel: BlockChannel): boolean {
  if (ref === undefined || ref.kind === "mapped") return true;
  if (ref.kind === "absolute") return ref.rank === channel.rank;
  // Builders see no channel, so only offset 0 is known to be the notifying rank itself.
  return ref.offset === 0;
}

/** A primitive built by a builder, valid against `channel`. */
export function primitiveArb(channel: BlockChannel): fc.Arbitrary<Primitive> {
  const ranks = rankArb(channel);
  const slot = (kind: RelationKind) => fc.constantFrom(...slotsOf(channel, kind));
  const add = fc.integer({ min: 1, max: channel.slots[0]?.arrivals ?? 1 });
  const target = fc.oneof(
    ranks.map((rank) => ({ mode: "p2p" as const, rank })),
    fc.constant({ mode: "broadcast" as const, rank: undefined }),
  );
  return fc.oneof(
    fc
      .record({
        tile: tileArb,
        slot: slot("producer-consumer"),
        add,
        target: fc.oneof(target, fc.constant({ mode: "p2p" as const, rank: undefined })),
        scope: anyScope,
        resource: deviceSignalResource,
        label: labelArb,
      })
      .map(({ target: t, scope, ...r }) => {
        // A notify that reaches another rank only orders anything at sys scope.
        const local = t.mode === "p2p" && isSelf(t.rank, channel);
        return producerTileNotify(defined({ ...r, ...t, scope: local ? scope : scope === undefined ? undefined : "sys" }));
      }),
    fc
      .record({ tile: tileArb, slot: slot("producer-consumer"), scope: anyScope, resource: deviceSignalResource, label: labelArb })
      .map((r) => consumerTileWait(defined(r))),
    fc
      .record({ tile: tileArb, slot: slot("peer"), add, target, scope: sysOrDefault, resource: deviceSignalResource })
      .map(({ target: t, ...r }) => peerTileNotify(defined({ ...r, ...t }))),
    fc
      .record({ tile: tileArb, slot: slot("peer"), rank: ranks, scope: sysOrDefault, resource: deviceSignalResource })
      .map((r) => peerTileWait(defined(r))),
    fc
      .record({ tile: tileArb, slot: slot("rank"), add, target, resource: hostResource, label: labelArb })
      .map(({ target: t, ...r }) => rankNotify(defined({ ...r, ...t }))),
    fc.record({ slot: slot("rank"), rank: ranks, resource: hostResource }).map((r) => rankWait(defined(r))),
    fc
      .record({
        tensor: fc.constantFrom("buf", "tokens"),
        tile: tileArb,
        target: fc.oneof(target, fc.constant({ mode: "p2p" as const, rank: undefined })),
        resource: deviceDataResource,
      })
      .chain(({ target: t, ...r }) => fc.constantFrom(tilePushData, tilePullData).map((build) => build(defined({ ...r, ...t })))),
    fc
      .record({ src: ranks, dst: ranks, tile: fc.option(tileArb, { nil: undefined }), resource: hostResource })
      .map(({ src, dst, ...r }) =>
        rankCopyData(defined({ ...r, src: { tensor: "K_shards", rank: src }, dst: { tensor: "K", rank: dst } })),
      ),
  );
}
