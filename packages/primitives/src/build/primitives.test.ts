import { describe, expect, it } from "vitest";
import { Primitive } from "../model/primitive.js";
import { PRIMITIVES } from "../semantics/table.js";
import { PrimitiveError } from "../validate/issues.js";
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
} from "./primitives.js";

function roundTrips(p: Primitive): void {
  expect(Primitive.parse(JSON.parse(JSON.stringify(p)))).toStrictEqual(p);
}

describe("builders fill TileLink's defaults", () => {
  it("producerTileNotify: release, gpu scope, p2p, sm, add 1", () => {
    const p = producerTileNotify({ tile: [2, 3], slot: 5 });
    expect(p).toStrictEqual({
      primitive: "producer_tile_notify",
      side: "device",
      order: "release",
      scope: "gpu",
      resource: { unit: "sm" },
      tile: { index: [2, 3] },
      mode: "p2p",
      slot: 5,
      add: 1,
    });
    roundTrips(p);
  });

  it("producerTileNotify widens the default scope to sys when it broadcasts or names a remote rank", () => {
    expect(producerTileNotify({ tile: [0], slot: 0, mode: "broadcast" }).scope).toBe("sys");
    expect(producerTileNotify({ tile: [0], slot: 0, rank: { kind: "relative", offset: -1 } }).scope).toBe("sys");
    expect(producerTileNotify({ tile: [0], slot: 0, rank: 3 }).scope).toBe("sys");
    expect(producerTileNotify({ tile: [0], slot: 0, rank: { kind: "relative", offset: 0 } }).scope).toBe("gpu");
    expect(producerTileNotify({ tile: [0], slot: 0, rank: { kind: "mapped", map: "f_R" } }).scope).toBe("gpu");
  });

  it("consumerTileWait: acquire, gpu scope, sm", () => {
    const p = consumerTileWait({ tile: [1, 4], slot: 2 });
    expect(p).toMatchObject({
      primitive: "consumer_tile_wait",
      side: "device",
      order: "acquire",
      scope: "gpu",
      resource: { unit: "sm" },
      slot: 2,
    });
    roundTrips(p);
  });

  it("peerTileNotify / peerTileWait: sys scope, the rank they carry", () => {
    const n = peerTileNotify({ tile: [7, 0], rank: { kind: "relative", offset: -1 }, slot: 1, label: "ring" });
    expect(n).toMatchObject({ order: "release", scope: "sys", mode: "p2p", rank: { kind: "relative", offset: -1 }, label: "ring" });
    const w = peerTileWait({ tile: [7, 0], rank: 3, slot: 1 });
    expect(w).toMatchObject({ order: "acquire", scope: "sys", rank: { kind: "absolute", rank: 3 } });
    expect(peerTileNotify({ tile: [0], slot: 0, mode: "broadcast" })).not.toHaveProperty("rank");
    roundTrips(n);
    roundTrips(w);
  });

  it("rankNotify / rankWait: host side on the copy engine, sys scope", () => {
    const n = rankNotify({ tile: [2], rank: 0, slot: 2 });
    expect(n).toMatchObject({ side: "host", order: "release", scope: "sys", resource: { unit: "copy-engine" } });
    const w = rankWait({ rank: 1, slot: 4, resource: { unit: "copy-engine", stream: 1 } });
    expect(w).toMatchObject({
      side: "host",
      order: "acquire",
      resource: { unit: "copy-engine", stream: 1 },
      rank: { kind: "absolute", rank: 1 },
    });
    roundTrips(n);
    roundTrips(w);
  });

  it("tilePushData / tilePullData: relaxed device data, sm or tma", () => {
    const push = tilePushData({ tensor: "buffers", tile: [3, 1], rank: { kind: "relative", offset: -1 } });
    expect(push).toMatchObject({
      side: "device",
      order: "relaxed",
      scope: "sys",
      resource: { unit: "sm" },
      mode: "p2p",
      tensor: "buffers",
    });
    const pull = tilePullData({ tensor: "token_shards", tile: { index: [0, 2], shapeMap: "f_S" }, resource: { unit: "tma", sms: 20 } });
    expect(pull).toMatchObject({ resource: { unit: "tma", sms: 20 }, tile: { index: [0, 2], shapeMap: "f_S" } });
    expect(pull).not.toHaveProperty("rank");
    roundTrips(push);
    roundTrips(pull);
  });

  it("rankCopyData: relaxed host copy on the copy engine, direction from src/dst", () => {
    const c = rankCopyData({ src: { tensor: "K_shards", rank: 2 }, dst: { tensor: "K", rank: 0 }, tile: [2] });
    expect(c).toMatchObject({
      side: "host",
      order: "relaxed",
      resource: { unit: "copy-engine" },
      src: { tensor: "K_shards", rank: { kind: "absolute", rank: 2 } },
      dst: { tensor: "K", rank: { kind: "absolute", rank: 0 } },
    });
    roundTrips(c);
  });

  it("every builder's default side, order and scope is the one in PRIMITIVES", () => {
    const built = [
      consumerTileWait({ tile: [0], slot: 0 }),
      peerTileNotify({ tile: [0], slot: 0, rank: 1 }),
      peerTileWait({ tile: [0], slot: 0, rank: 1 }),
      rankNotify({ tile: [0], slot: 0, rank: 1 }),
      rankWait({ slot: 0, rank: 1 }),
      tilePushData({ tensor: "t", tile: [0] }),
      tilePullData({ tensor: "t", tile: [0] }),
      rankCopyData({ src: { tensor: "a", rank: 0 }, dst: { tensor: "b", rank: 1 } }),
      producerTileNotify({ tile: [0], slot: 0 }),
    ];
    expect(new Set(built.map((p) => p.primitive)).size).toBe(9);
    for (const p of built) {
      const spec = PRIMITIVES[p.primitive];
      expect([p.side, p.order, p.scope, p.resource.unit]).toEqual([spec.side, spec.order, spec.defaultScope, spec.resources[0]]);
    }
  });
});

describe("builders reject contradictions", () => {
  it("throws PrimitiveError with the code and path of the problem", () => {
    const attempt = () => consumerTileWait({ tile: [0], slot: 0, order: "release" });
    expect(attempt).toThrow(PrimitiveError);
    try {
      attempt();
    } catch (e) {
      expect((e as PrimitiveError).code).toBe("release-on-wait");
      expect((e as PrimitiveError).path).toEqual(["order"]);
      expect((e as PrimitiveError).message).toMatch(/^order: consumer_tile_wait carries acquire order/);
    }
  });

  it("reports every problem, not just the first", () => {
    try {
      rankNotify({ tile: [0], slot: 0, order: "acquire", resource: { unit: "tma" }, scope: "cta" });
      expect.unreachable();
    } catch (e) {
      const codes = (e as PrimitiveError).issues.map((i) => i.code).sort();
      expect(codes).toEqual(["acquire-on-notify", "narrow-scope-across-ranks", "p2p-without-rank", "tma-on-host"]);
    }
  });

  it("rejects malformed input as invalid-shape", () => {
    expect(() => tilePushData({ tensor: "not a name", tile: [0] })).toThrow(/identifier/);
    expect(() => producerTileNotify({ tile: [], slot: 0 })).toThrow(PrimitiveError);
    expect(() => producerTileNotify({ tile: [0], slot: 0, add: 0 })).toThrow(expect.objectContaining({ code: "add-below-one" }));
  });
});
