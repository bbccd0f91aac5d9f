// @ovl/primitives README: one stage of TileLink's GEMM + ring ReduceScatter (Figure 4).
import {
  allocateSlots,
  assertPrimitive,
  blockChannel,
  consumerTileWait,
  epochTarget,
  PrimitiveError,
  peerTileNotify,
  peerTileWait,
  primitiveProgram,
  producerTileNotify,
  reached,
  tilePushData,
  validatePrimitive,
} from "@ovl/primitives";
import { holds, same } from "./check.js";

let channel = blockChannel({ rank: 0, worldSize: 8 });
const gemm = allocateSlots(channel, { kind: "producer-consumer", producer: "gemm", consumer: "reduce", count: 8 });
const ring = allocateSlots(gemm.channel, { kind: "peer", producer: "reduce", consumer: "reduce", count: 8 });
channel = ring.channel;

const program = primitiveProgram(channel, [
  producerTileNotify({ tile: [3, 1], slot: gemm.slots[3]! }),
  consumerTileWait({ tile: [3, 1], slot: gemm.slots[3]! }),
  peerTileWait({ tile: [3, 1], rank: 1, slot: ring.slots[3]! }),
  tilePushData({ tensor: "buffers", tile: [3, 1], rank: { kind: "relative", offset: -1 } }),
  peerTileNotify({ tile: [3, 1], rank: { kind: "relative", offset: -1 }, slot: ring.slots[3]! }),
]);
same(program.primitives.length, 5, "five primitives");

const bad = validatePrimitive({ ...program.primitives[1], order: "release" }, channel);
holds(!bad.ok, "a wait with release order is rejected");
same(bad.issues[0]?.code, "release-on-wait", "its code");

same(epochTarget(3, 1), 3n, "launch 3 waits for 3");
same(reached(2, 0xffff_fffe), true, "a wrapped counter is ahead");
same(reached(0xffff_fffe, 2), false, "and not behind");

try {
  assertPrimitive({ ...program.primitives[1], order: "release" }, channel);
  throw new Error("assertPrimitive passed a release wait");
} catch (e) {
  holds(e instanceof PrimitiveError && e.code === "release-on-wait", "assertPrimitive throws PrimitiveError with the first code");
}
console.log("@ovl/primitives: README example ok");
