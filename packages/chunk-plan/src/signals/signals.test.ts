import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChunkPlan, Op } from "../model/schema.js";
import { allGatherPullSwizzled, allGatherPushRing, gemmReduceScatterDirect, rowsOf } from "../lower/testing/plans.js";
import { SignalError, planSignals, slotsOfRank, waitTarget } from "./index.js";

/** Number of notify entries naming each `rank/slot`. */
function notifyCounts(plan: ChunkPlan): Map<string, number> {
  const counts = new Map<string, number>();
  for (const streams of plan.signals?.notify ?? []) {
    for (const ops of streams) {
      for (const ref of ops) {
        if (ref === null) continue;
        const key = `${ref.rank}/${ref.slot}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
    }
  }
  return counts;
}

function expectArrivalsMatchNotify(plan: ChunkPlan): void {
  const counts = notifyCounts(plan);
  for (const { rank, slots } of plan.signals?.slots ?? []) {
    slots.forEach((s, i) => {
      expect(s.slot).toBe(i);
      if (s.purpose !== "tile-done") expect(s.arrivals).toBe(counts.get(`${rank}/${s.slot}`) ?? 0);
    });
  }
  // Every notify entry names an existing non-tile-done slot.
  for (const key of counts.keys()) {
    const [rank, slot] = key.split("/").map(Number) as [number, number];
    expect(slotsOfRank(plan, rank)[slot]?.purpose).not.toBe("tile-done");
  }
}

const gatherArb = fc.record({
  world: fc.integer({ min: 2, max: 7 }),
  split: fc.integer({ min: 1, max: 3 }),
  streams: fc.integer({ min: 1, max: 3 }),
  extra: fc.integer({ min: 0, max: 200 }),
  K: fc.integer({ min: 1, max: 64 }),
});

describe("planSignals", () => {
  it("gives every arriving chunk one slot whose arrivals equal the ops notifying it (swizzled AllGather)", () => {
    fc.assert(
      fc.property(gatherArb, ({ world, split, streams, extra, K }) => {
        const M = world * split + extra;
        const plan = planSignals(allGatherPullSwizzled({ world, M, K, split, streams }));
        expectArrivalsMatchNotify(plan);
        for (let r = 0; r < world; r++) {
          const slots = slotsOfRank(plan, r);
          expect(slots).toHaveLength((world - 1) * split);
          expect(slots.every((s) => s.purpose === "chunk-ready" && s.arrivals === 1)).toBe(true);
          // Sorted by region: offsets strictly increase, and the local shard has no slot.
          const starts = slots.map((s) => s.region?.offsets[0] ?? -1);
          expect([...starts].sort((a, b) => a - b)).toEqual(starts);
        }
      }),
      { numRuns: 40 },
    );
  });

  it("counts every contributor of a reduction and adds tile-done slots for compute dependencies", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 7 }), fc.integer({ min: 1, max: 3 }), (world, splitN) => {
        const plan = planSignals(gemmReduceScatterDirect({ world, M: 10 * world, N: 4 * splitN, splitN }));
        expectArrivalsMatchNotify(plan);
        for (let r = 0; r < world; r++) {
          const slots = slotsOfRank(plan, r);
          const chunk = slots.filter((s) => s.purpose === "chunk-ready");
          const done = slots.filter((s) => s.purpose === "tile-done");
          expect(chunk).toHaveLength(splitN);
          expect(chunk.every((s) => s.arrivals === world && s.region?.tensor === "out")).toBe(true);
          expect(done).toHaveLength(world * splitN);
          // Chunk slots are numbered before tile-done slots.
          expect(Math.max(...chunk.map((s) => s.slot))).toBeLessThan(Math.min(...done.map((s) => s.slot)));
        }
      }),
      { numRuns: 20 },
    );
  });

  it("marks chunks forwarded along a push chain as transit, and the last arrival as chunk-ready", () => {
    for (let world = 2; world <= 7; world++) {
      const plan = planSignals(allGatherPushRing({ world, M: 8 * world, K: 4 }));
      expectArrivalsMatchNotify(plan);
      for (let r = 0; r < world; r++) {
        const slots = slotsOfRank(plan, r);
        expect(slots.filter((s) => s.purpose === "transit")).toHaveLength(world - 2);
        // The shard arriving last at r is the one that started at r + 1; r does not forward it.
        const last = slots.find((s) => s.purpose === "chunk-ready");
        expect(last?.region?.offsets[0]).toBe(8 * ((r + 1) % world));
      }
      // A push notifies a slot on its destination rank.
      plan.ranks.forEach((rp) =>
        rp.streams[0]?.forEach((_op, i) => expect(plan.signals?.notify[rp.rank]?.[0]?.[i]?.rank).toBe((rp.rank + 1) % world)),
      );
    }
  });

  it("numbers slots independently of how ops are spread over streams", () => {
    fc.assert(
      fc.property(gatherArb, ({ world, split, streams, extra, K }) => {
        const M = world * split + extra;
        const one = planSignals(allGatherPullSwizzled({ world, M, K, split, streams: 1 }));
        const many = planSignals(allGatherPullSwizzled({ world, M, K, split, streams }));
        expect(many.signals?.slots).toEqual(one.signals?.slots);
      }),
      { numRuns: 25 },
    );
  });

  it("does not modify its input", () => {
    const plan = allGatherPullSwizzled({ world: 3, M: 30, K: 2 });
    const copy = structuredClone(plan);
    planSignals(plan);
    expect(plan).toEqual(copy);
  });

  it("rejects plans it cannot number correctly, with a typed code", () => {
    const base = allGatherPullSwizzled({ world: 2, M: 8, K: 2 });
    const withOps = (ops: Op[]): ChunkPlan => ({
      ...base,
      ranks: base.ranks.map((r) => (r.rank === 0 ? { ...r, streams: [ops] } : r)),
    });
    const rows = rowsOf("A", 4, 8, 2);
    const pull: Op = { kind: "p2p", side: "pull", peer: 1, src: rows, dst: rows, deps: [] };
    const code = (plan: ChunkPlan) => {
      try {
        planSignals(plan);
        return "none";
      } catch (e) {
        expect(e).toBeInstanceOf(SignalError);
        return (e as SignalError).code;
      }
    };
    expect(code(withOps([pull, pull]))).toBe("conflicting-writes");
    expect(code(withOps([pull, { ...pull, reduce: "sum" }]))).toBe("none");
    expect(code(withOps([{ ...pull, peer: 0 }]))).toBe("bad-peer");
    expect(code(withOps([{ ...pull, peer: 5 }]))).toBe("bad-peer");
    expect(code(withOps([{ ...pull, dst: { ...rows, tensor: "B" } }]))).toBe("unknown-tensor");
    expect(code(withOps([{ ...pull, dst: rowsOf("A", 4, 9, 2) }]))).toBe("bad-region");
    expect(code({ ...base, ranks: [...base.ranks, { rank: 2, local: [], streams: [] }] })).toBe("bad-rank");
  });
});

describe("waitTarget", () => {
  it("is epoch × arrivals, monotone across launches", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 64 }), (epoch, arrivals) => {
        expect(waitTarget(epoch, { arrivals })).toBe(epoch * arrivals);
        expect(waitTarget(epoch + 1, { arrivals }) - waitTarget(epoch, { arrivals })).toBe(arrivals);
      }),
      { numRuns: 50 },
    );
  });

  it("rejects epoch 0 and targets that overflow the counter", () => {
    expect(() => waitTarget(0, { arrivals: 1 })).toThrow(expect.objectContaining({ code: "bad-epoch" }));
    expect(() => waitTarget(1.5, { arrivals: 1 })).toThrow(expect.objectContaining({ code: "bad-epoch" }));
    expect(() => waitTarget(2 ** 31, { arrivals: 2 })).toThrow(expect.objectContaining({ code: "counter-overflow" }));
    expect(waitTarget(2 ** 31, { arrivals: 2 }, 64)).toBe(2 ** 32);
  });
});
