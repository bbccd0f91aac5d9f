// The semantic rules of TileLink §3.2 checked on values that already have the right shape:
// memory order, target ranks, resource binding and scope per primitive, and each signal
// against the BlockChannel's slot configuration.
import type { RankRef, SignalWidth } from "../model/common.js";
import type { BlockChannel, RelationKind } from "../model/channel.js";
import type { Primitive } from "../model/primitive.js";
import { PRIMITIVES } from "../semantics/table.js";
import { issue, type IssuePath, type PrimitiveIssue } from "./issues.js";

/** The rank references a primitive carries, with their paths. */
function rankRefs(p: Primitive): [IssuePath, RankRef][] {
  switch (p.primitive) {
    case "rank_copy_data":
      return [
        [["src", "rank"], p.src.rank],
        [["dst", "rank"], p.dst.rank],
      ];
    case "consumer_tile_wait":
      return [];
    default:
      return p.rank === undefined ? [] : [[["rank"], p.rank]];
  }
}

/** Whether `ref` names a rank other than the channel's own, as far as can be told statically. */
function isRemote(ref: RankRef, channel: BlockChannel | undefined): boolean {
  if (ref.kind === "absolute") return channel !== undefined && ref.rank !== channel.rank;
  if (ref.kind === "relative") {
    if (channel === undefined) return ref.offset !== 0;
    return ((ref.offset % channel.worldSize) + channel.worldSize) % channel.worldSize !== 0;
  }
  return false;
}

/**
 * Whether `p` is observed by another rank or the host, so that only `sys` scope orders it.
 * A producer notify crosses ranks when it broadcasts or names a remote rank; every peer,
 * rank and data primitive does.
 */
export function crossesRanks(p: Primitive, channel?: BlockChannel): boolean {
  if (PRIMITIVES[p.primitive].crossRank) return true;
  if (p.primitive !== "producer_tile_notify") return false;
  return p.mode === "broadcast" || (p.rank !== undefined && isRemote(p.rank, channel));
}

function orderRules(p: Primitive, base: IssuePath): PrimitiveIssue[] {
  const spec = PRIMITIVES[p.primitive];
  if (p.order === spec.order) return [];
  const at = (code: PrimitiveIssue["code"], why: string) => [
    issue(code, base, ["order"], `${p.primitive} carries ${spec.order} order, not ${p.order}: ${why}`),
  ];
  if (spec.role === "notify") {
    return p.order === "acquire"
      ? at("acquire-on-notify", "a notify must keep the stores before it from moving after it, which is release")
      : at("relaxed-signal", "a relaxed notify publishes nothing, so the consumer may read stale data");
  }
  if (spec.role === "wait") {
    return p.order === "release"
      ? at("release-on-wait", "a wait must keep the loads after it from moving before it, which is acquire")
      : at("relaxed-signal", "a relaxed wait lets the loads after it see data from before the notify");
  }
  return at("ordered-data", "data primitives are relaxed; put the ordering on the notify or wait around them");
}

function targetRules(p: Primitive, base: IssuePath): PrimitiveIssue[] {
  if (!("mode" in p)) return [];
  if (p.mode === "broadcast" && p.rank !== undefined) {
    return [
      issue(
        "rank-with-broadcast",
        base,
        ["rank"],
        `${p.primitive} in broadcast mode reaches every rank; drop rank, or use mode "p2p" to reach only that rank`,
      ),
    ];
  }
  if (p.mode === "p2p" && p.rank === undefined && PRIMITIVES[p.primitive].rank === "required") {
    return [
      issue(
        "p2p-without-rank",
        base,
        ["rank"],
        `${p.primitive} in p2p mode needs the rank it notifies; give rank, or use mode "broadcast"`,
      ),
    ];
  }
  return [];
}

function resourceRules(p: Primitive, base: IssuePath): PrimitiveIssue[] {
  const spec = PRIMITIVES[p.primitive];
  const unit = p.resource.unit;
  const at = (code: PrimitiveIssue["code"], why: string) => [
    issue(code, base, ["resource", "unit"], `${p.primitive} cannot be bound to ${unit}: ${why}`),
  ];
  if (spec.side === "host") {
    if (unit === "sm")
      return at(
        "host-on-sm",
        "host-side primitives are issued on a stream and drive the copy engine; use a device-side primitive to run on SMs",
      );
    if (unit === "tma") return at("tma-on-host", "the TMA is issued from SMs inside a kernel; bind host-side primitives to copy-engine");
    return [];
  }
  if (unit === "copy-engine")
    return at("device-on-copy-engine", "device-side primitives run on SMs; use rank_copy_data / rank_notify to drive the copy engine");
  if (unit === "tma" && spec.group === "signal")
    return at("tma-on-signal", "the TMA moves tiles of data; signals are atomics issued by SM threads, bind them to sm");
  return [];
}

function sideRules(p: Primitive, base: IssuePath): PrimitiveIssue[] {
  const side = PRIMITIVES[p.primitive].side;
  if (p.side === side) return [];
  return [issue("wrong-side", base, ["side"], `${p.primitive} is a ${side}-side primitive (TileLink Table 3), not ${p.side}-side`)];
}

function scopeRules(p: Primitive, channel: BlockChannel | undefined, base: IssuePath): PrimitiveIssue[] {
  if (p.scope === "sys" || !crossesRanks(p, channel)) return [];
  return [
    issue(
      "narrow-scope-across-ranks",
      base,
      ["scope"],
      `${p.primitive} is observed by another rank or the host, which only sys scope covers; ${p.scope} scope orders nothing for them`,
    ),
  ];
}

const RELATION_OF: Readonly<Record<string, RelationKind>> = {
  producer_tile_notify: "producer-consumer",
  consumer_tile_wait: "producer-consumer",
  peer_tile_notify: "peer",
  peer_tile_wait: "peer",
  rank_notify: "rank",
  rank_wait: "rank",
};

function channelRulesFor(p: Primitive, channel: BlockChannel, base: IssuePath): PrimitiveIssue[] {
  const out: PrimitiveIssue[] = [];
  for (const [path, ref] of rankRefs(p)) {
    if (ref.kind === "absolute" && ref.rank >= channel.worldSize) {
      out.push(
        issue(
          "rank-outside-world",
          base,
          path,
          `rank ${ref.rank} is outside the world of ${channel.worldSize} ranks (0..${channel.worldSize - 1})`,
        ),
      );
    }
  }
  if (!("slot" in p)) return out;
  const slot = channel.slots.find((s) => s.index === p.slot);
  if (slot === undefined) {
    const known = channel.slots.map((s) => s.index).join(", ") || "none";
    out.push(
      issue(
        "unknown-slot",
        base,
        ["slot"],
        `signal slot ${p.slot} is not in the channel's slot configuration (slots: ${known}); allocate it first`,
      ),
    );
    return out;
  }
  if ("add" in p && p.add > slot.arrivals) {
    out.push(
      issue(
        "add-exceeds-arrivals",
        base,
        ["add"],
        `a notify adding ${p.add} overshoots slot ${slot.index}, which expects ${slot.arrivals} per launch: the next launch's wait would pass early`,
      ),
    );
  }
  const relation = channel.relations.find((r) => r.slots.includes(slot.index));
  const expected = RELATION_OF[p.primitive];
  if (relation !== undefined && expected !== undefined && relation.kind !== expected) {
    out.push(
      issue(
        "slot-relation-mismatch",
        base,
        ["slot"],
        `${p.primitive} is a ${expected} signal but slot ${slot.index} belongs to the ${relation.kind} relation ${relation.producer} -> ${relation.consumer}`,
      ),
    );
  }
  return out;
}

/** Every rule violated by a well-shaped primitive; the channel-dependent rules need `channel`. */
export function primitiveRules(p: Primitive, channel: BlockChannel | undefined, base: IssuePath): PrimitiveIssue[] {
  return [
    ...sideRules(p, base),
    ...orderRules(p, base),
    ...targetRules(p, base),
    ...resourceRules(p, base),
    ...scopeRules(p, channel, base),
    ...(channel === undefined ? [] : channelRulesFor(p, channel, base)),
  ];
}

/** Half the range of a counter: the most a slot may advance per launch for `reached` to hold. */
function halfRange(width: SignalWidth): number {
  return 2 ** (width - 1);
}

/** Every rule violated by a well-shaped BlockChannel. */
export function channelRules(c: BlockChannel, base: IssuePath): PrimitiveIssue[] {
  const out: PrimitiveIssue[] = [];
  if (c.rank >= c.worldSize) {
    out.push(
      issue("rank-outside-world", base, ["rank"], `rank ${c.rank} is outside the world of ${c.worldSize} ranks (0..${c.worldSize - 1})`),
    );
  }
  const seen = new Set<number>();
  c.slots.forEach((s, i) => {
    if (seen.has(s.index))
      out.push(
        issue("duplicate-slot", base, ["slots", i, "index"], `signal slot ${s.index} is configured twice; give each slot its own index`),
      );
    seen.add(s.index);
    if (s.arrivals >= halfRange(s.width)) {
      out.push(
        issue(
          "arrivals-exceed-half-range",
          base,
          ["slots", i, "arrivals"],
          `slot ${s.index} expects ${s.arrivals} arrivals per launch, but a ${s.width}-bit counter only compares within 2^${s.width - 1}; use fewer arrivals or 64-bit slots`,
        ),
      );
    }
  });
  const owner = new Map<number, number>();
  c.relations.forEach((r, i) => {
    r.slots.forEach((slot, j) => {
      if (!seen.has(slot))
        out.push(
          issue(
            "relation-unknown-slot",
            base,
            ["relations", i, "slots", j],
            `relation ${r.producer} -> ${r.consumer} uses slot ${slot}, which is not configured`,
          ),
        );
      const prev = owner.get(slot);
      if (prev !== undefined && prev !== i) {
        out.push(
          issue(
            "slot-in-two-relations",
            base,
            ["relations", i, "slots", j],
            `slot ${slot} already belongs to relation ${prev}; a slot counts the arrivals of one relation only`,
          ),
        );
      }
      owner.set(slot, i);
    });
  });
  return out;
}
