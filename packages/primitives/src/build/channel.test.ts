import { describe, expect, it } from "vitest";
import { PrimitiveError } from "../validate/issues.js";
import { allocateSlots, blockChannel, primitiveProgram, waitTarget } from "./channel.js";
import { consumerTileWait, producerTileNotify, rankCopyData, rankNotify } from "./primitives.js";

describe("blockChannel and allocateSlots", () => {
  it("starts empty and hands out consecutive fresh slots per relation", () => {
    const empty = blockChannel({ rank: 0, worldSize: 8 });
    expect(empty).toEqual({ rank: 0, worldSize: 8, slots: [], relations: [] });
    const a = allocateSlots(empty, { kind: "producer-consumer", producer: "allgather", consumer: "gemm", count: 8 });
    expect(a.slots).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const b = allocateSlots(a.channel, { kind: "peer", producer: "reduce", consumer: "reduce", count: 2, arrivals: 3, width: 64 });
    expect(b.slots).toEqual([8, 9]);
    expect(b.channel.slots.slice(8)).toEqual([
      { index: 8, arrivals: 3, width: 64 },
      { index: 9, arrivals: 3, width: 64 },
    ]);
    expect(b.channel.relations.map((r) => [r.kind, r.slots])).toEqual([
      ["producer-consumer", [0, 1, 2, 3, 4, 5, 6, 7]],
      ["peer", [8, 9]],
    ]);
    // Pure: the input channel is untouched.
    expect(a.channel.slots).toHaveLength(8);
  });

  it("allocates after the highest index in use, even with gaps", () => {
    const c = blockChannel({ rank: 0, worldSize: 2, slots: [{ index: 5, arrivals: 1, width: 32 }] });
    expect(allocateSlots(c, { kind: "rank", producer: "copy", consumer: "attn", count: 1 }).slots).toEqual([6]);
  });

  it("rejects a count below 1, arrivals below 1 and a rank outside the world", () => {
    const c = blockChannel({ rank: 0, worldSize: 2 });
    expect(() => allocateSlots(c, { kind: "rank", producer: "p", consumer: "c", count: 0 })).toThrow(PrimitiveError);
    expect(() => allocateSlots(c, { kind: "rank", producer: "p", consumer: "c", count: 1, arrivals: 0 })).toThrow(
      expect.objectContaining({ code: "arrivals-below-one", path: ["slots", 0, "arrivals"] }),
    );
    expect(() => blockChannel({ rank: 2, worldSize: 2 })).toThrow(expect.objectContaining({ code: "rank-outside-world" }));
  });
});

describe("waitTarget", () => {
  it("is epoch × arrivals of the slot, at the slot's width", () => {
    const { channel } = allocateSlots(blockChannel({ rank: 0, worldSize: 4 }), {
      kind: "producer-consumer",
      producer: "allgather",
      consumer: "gemm",
      count: 1,
      arrivals: 4,
    });
    expect(waitTarget(channel, 0, 1)).toBe(4n);
    expect(waitTarget(channel, 0, 3)).toBe(12n);
    expect(waitTarget(channel, 0, 2 ** 30)).toBe(0n);
    expect(() => waitTarget(channel, 1, 1)).toThrow(expect.objectContaining({ code: "unknown-slot" }));
  });
});

describe("primitiveProgram", () => {
  it("builds the AllGather-KV + attention program of TileLink Figure 6 on rank 0 of 2", () => {
    const { channel, slots } = allocateSlots(blockChannel({ rank: 0, worldSize: 2 }), {
      kind: "rank",
      producer: "copy",
      consumer: "attention",
      count: 2,
    });
    const program = primitiveProgram(channel, [
      rankCopyData({ src: { tensor: "K_shards", rank: 1 }, dst: { tensor: "K", rank: 0 }, tile: [1] }),
      rankNotify({ tile: [1], rank: 0, slot: slots[1] ?? -1 }),
    ]);
    expect(program.$schema).toBe("ovl.primitives/v1");
    expect(program.primitives.map((p) => p.primitive)).toEqual(["rank_copy_data", "rank_notify"]);
  });

  it("rejects primitives that contradict the channel", () => {
    const channel = blockChannel({ rank: 0, worldSize: 2 });
    expect(() => primitiveProgram(channel, [consumerTileWait({ tile: [0], slot: 0 })])).toThrow(
      expect.objectContaining({ code: "unknown-slot", path: ["primitives", 0, "slot"] }),
    );
    expect(() => primitiveProgram(channel, [producerTileNotify({ tile: [0], slot: 0, rank: 2 })])).toThrow(PrimitiveError);
  });
});
