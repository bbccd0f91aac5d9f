import { describe, expect, it } from "vitest";
import type { BlockChannel } from "../model/channel.js";
import {
  consumerTileWait,
  peerTileNotify,
  peerTileWait,
  producerTileNotify,
  rankCopyData,
  rankNotify,
  rankWait,
  tilePushData,
} from "../build/primitives.js";
import type { PrimitiveIssueCode } from "./issues.js";
import { validateChannel, validatePrimitive, validateProgram } from "./validate.js";

const channel: BlockChannel = {
  rank: 1,
  worldSize: 4,
  slots: [
    { index: 0, arrivals: 2, width: 32 },
    { index: 1, arrivals: 1, width: 32 },
    { index: 2, arrivals: 1, width: 64 },
  ],
  relations: [
    { kind: "producer-consumer", producer: "allgather", consumer: "gemm", slots: [0] },
    { kind: "peer", producer: "reduce", consumer: "reduce", slots: [1] },
  ],
};

// Each case: a valid value, the one change that breaks one rule, and the code and path expected.
type Case = { rule: PrimitiveIssueCode; base: object; change: Record<string, unknown>; path: (string | number)[]; channel?: boolean };

const cases: Case[] = [
  { rule: "wrong-side", base: rankWait({ rank: 0, slot: 2 }), change: { side: "device" }, path: ["side"] },
  { rule: "acquire-on-notify", base: producerTileNotify({ tile: [0], slot: 0 }), change: { order: "acquire" }, path: ["order"] },
  { rule: "release-on-wait", base: peerTileWait({ tile: [0], rank: 0, slot: 1 }), change: { order: "release" }, path: ["order"] },
  { rule: "relaxed-signal", base: consumerTileWait({ tile: [0], slot: 0 }), change: { order: "relaxed" }, path: ["order"] },
  { rule: "relaxed-signal", base: rankNotify({ tile: [0], rank: 0, slot: 2 }), change: { order: "relaxed" }, path: ["order"] },
  { rule: "ordered-data", base: tilePushData({ tensor: "buf", tile: [0] }), change: { order: "release" }, path: ["order"] },
  { rule: "rank-with-broadcast", base: peerTileNotify({ tile: [0], slot: 1, rank: 2 }), change: { mode: "broadcast" }, path: ["rank"] },
  { rule: "rank-with-broadcast", base: tilePushData({ tensor: "buf", tile: [0], rank: 2 }), change: { mode: "broadcast" }, path: ["rank"] },
  { rule: "p2p-without-rank", base: peerTileNotify({ tile: [0], slot: 1, mode: "broadcast" }), change: { mode: "p2p" }, path: ["rank"] },
  { rule: "p2p-without-rank", base: rankNotify({ tile: [0], slot: 2, mode: "broadcast" }), change: { mode: "p2p" }, path: ["rank"] },
  {
    rule: "rank-outside-world",
    base: peerTileWait({ tile: [0], rank: 3, slot: 1 }),
    change: { rank: { kind: "absolute", rank: 4 } },
    path: ["rank"],
    channel: true,
  },
  {
    rule: "rank-outside-world",
    base: rankCopyData({ src: { tensor: "a", rank: 0 }, dst: { tensor: "b", rank: 1 } }),
    change: { dst: { tensor: "b", rank: { kind: "absolute", rank: 9 } } },
    path: ["dst", "rank"],
    channel: true,
  },
  {
    rule: "host-on-sm",
    base: rankCopyData({ src: { tensor: "a", rank: 0 }, dst: { tensor: "b", rank: 1 } }),
    change: { resource: { unit: "sm", sms: 8 } },
    path: ["resource", "unit"],
  },
  { rule: "tma-on-host", base: rankWait({ rank: 0, slot: 2 }), change: { resource: { unit: "tma" } }, path: ["resource", "unit"] },
  {
    rule: "device-on-copy-engine",
    base: tilePushData({ tensor: "buf", tile: [0] }),
    change: { resource: { unit: "copy-engine" } },
    path: ["resource", "unit"],
  },
  {
    rule: "tma-on-signal",
    base: consumerTileWait({ tile: [0], slot: 0 }),
    change: { resource: { unit: "tma" } },
    path: ["resource", "unit"],
  },
  { rule: "narrow-scope-across-ranks", base: peerTileWait({ tile: [0], rank: 0, slot: 1 }), change: { scope: "cta" }, path: ["scope"] },
  { rule: "narrow-scope-across-ranks", base: peerTileNotify({ tile: [0], rank: 0, slot: 1 }), change: { scope: "gpu" }, path: ["scope"] },
  {
    rule: "narrow-scope-across-ranks",
    base: producerTileNotify({ tile: [0], slot: 0, mode: "broadcast" }),
    change: { scope: "cta" },
    path: ["scope"],
  },
  {
    rule: "narrow-scope-across-ranks",
    base: producerTileNotify({ tile: [0], slot: 0, rank: 1, scope: "gpu" }),
    change: { rank: { kind: "absolute", rank: 2 } },
    path: ["scope"],
    channel: true,
  },
  { rule: "unknown-slot", base: consumerTileWait({ tile: [0], slot: 0 }), change: { slot: 7 }, path: ["slot"], channel: true },
  { rule: "unknown-slot", base: rankNotify({ tile: [0], rank: 1, slot: 2 }), change: { slot: 3 }, path: ["slot"], channel: true },
  {
    rule: "add-exceeds-arrivals",
    base: producerTileNotify({ tile: [0], slot: 0, add: 2 }),
    change: { add: 3 },
    path: ["add"],
    channel: true,
  },
  { rule: "add-below-one", base: producerTileNotify({ tile: [0], slot: 0 }), change: { add: 0 }, path: ["add"] },
  { rule: "slot-relation-mismatch", base: consumerTileWait({ tile: [0], slot: 0 }), change: { slot: 1 }, path: ["slot"], channel: true },
  { rule: "invalid-shape", base: consumerTileWait({ tile: [0], slot: 0 }), change: { scope: "cluster" }, path: ["scope"] },
];

describe("primitive rules", () => {
  it.each(cases)("$rule at $path", ({ rule, base, change, path, channel: withChannel }) => {
    const ctx = withChannel ? channel : undefined;
    // The value before the change is valid, so the issue comes from the change alone.
    expect(validatePrimitive(base, ctx)).toEqual({ ok: true, value: base });
    const result = validatePrimitive({ ...base, ...change }, ctx);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues.map((i) => [i.code, i.path])).toContainEqual([rule, path]);
    for (const i of result.issues) expect(i.message.length).toBeGreaterThan(20);
  });

  it("accepts cta scope where producer and consumer share a thread block", () => {
    expect(validatePrimitive(consumerTileWait({ tile: [0], slot: 0, scope: "cta" }), channel).ok).toBe(true);
    expect(validatePrimitive(producerTileNotify({ tile: [0], slot: 0, scope: "cta" }), channel).ok).toBe(true);
    // A producer notify naming its own rank stays on the GPU.
    expect(validatePrimitive(producerTileNotify({ tile: [0], slot: 0, rank: 1, scope: "gpu" }), channel).ok).toBe(true);
  });
});

describe("channel rules", () => {
  const channelCases: { rule: PrimitiveIssueCode; change: Partial<BlockChannel>; path: (string | number)[] }[] = [
    { rule: "rank-outside-world", change: { rank: 4 }, path: ["rank"] },
    {
      rule: "arrivals-below-one",
      change: { slots: [{ index: 0, arrivals: 0, width: 32 }, ...channel.slots.slice(1)] },
      path: ["slots", 0, "arrivals"],
    },
    {
      rule: "arrivals-exceed-half-range",
      change: { slots: [{ index: 0, arrivals: 2 ** 31, width: 32 }, ...channel.slots.slice(1)] },
      path: ["slots", 0, "arrivals"],
    },
    { rule: "duplicate-slot", change: { slots: [...channel.slots, { index: 1, arrivals: 1, width: 32 }] }, path: ["slots", 3, "index"] },
    {
      rule: "relation-unknown-slot",
      change: { relations: [{ kind: "rank", producer: "copy", consumer: "attn", slots: [9] }] },
      path: ["relations", 0, "slots", 0],
    },
    {
      rule: "slot-in-two-relations",
      change: { relations: [...channel.relations, { kind: "rank", producer: "copy", consumer: "attn", slots: [2, 0] }] },
      path: ["relations", 2, "slots", 1],
    },
  ];

  it.each(channelCases)("$rule at $path", ({ rule, change, path }) => {
    expect(validateChannel(channel).ok).toBe(true);
    const result = validateChannel({ ...channel, ...change });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.issues.map((i) => [i.code, i.path])).toContainEqual([rule, path]);
  });

  it("accepts 64-bit slots with arrivals beyond the 32-bit half range", () => {
    expect(validateChannel({ ...channel, slots: [{ index: 0, arrivals: 2 ** 31, width: 64 }, ...channel.slots.slice(1)] }).ok).toBe(true);
  });
});

describe("validateProgram", () => {
  const program = {
    $schema: "ovl.primitives/v1",
    channel,
    primitives: [
      consumerTileWait({ tile: [0, 0], slot: 0 }),
      peerTileWait({ tile: [0, 0], rank: 2, slot: 1 }),
      peerTileNotify({ tile: [0, 0], rank: { kind: "relative", offset: -1 }, slot: 1 }),
    ],
  };

  it("accepts a consistent program", () => {
    expect(validateProgram(program)).toEqual({ ok: true, value: program });
  });

  it("reports issues from the channel and every primitive with their full paths", () => {
    const bad = {
      ...program,
      channel: { ...channel, rank: 5 },
      primitives: [program.primitives[0], { ...program.primitives[1], slot: 9 }, { ...program.primitives[2], order: "acquire" }],
    };
    const result = validateProgram(bad);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues.map((i) => [i.code, i.path])).toEqual([
      ["rank-outside-world", ["channel", "rank"]],
      ["unknown-slot", ["primitives", 1, "slot"]],
      ["acquire-on-notify", ["primitives", 2, "order"]],
    ]);
  });

  it("rejects another version tag and unknown fields", () => {
    const wrongTag = validateProgram({ ...program, $schema: "ovl.primitives/v2" });
    expect(wrongTag.ok ? [] : wrongTag.issues.map((i) => [i.code, i.path])).toEqual([["invalid-shape", ["$schema"]]]);
    const extra = validateProgram({ ...program, primitives: [{ ...program.primitives[0], scop: "gpu" }] });
    expect(extra.ok ? [] : extra.issues.map((i) => i.code)).toEqual(["invalid-shape"]);
  });
});
