// Lowering the two-level templates: hierarchical AllGather (either order, either schedule) as a
// consumer and hierarchical ReduceScatter as a producer pass checkTileSchedule on random meshes,
// shapes and tilings; every tile of a consumer waits on the slots of the rows it reads.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyTileArrivals, checkTileSchedule, lowerToTileSchedule } from "./index.js";
import { planSignals } from "../signals/index.js";
import { allGatherHierarchical, reduceScatterHierarchical } from "../templates/index.js";

const arb = fc.record({
  n: fc.integer({ min: 1, max: 3 }),
  g: fc.integer({ min: 1, max: 3 }),
  split: fc.integer({ min: 1, max: 2 }),
  extra: fc.integer({ min: 0, max: 120 }),
  N: fc.integer({ min: 8, max: 150 }),
  BM: fc.constantFrom(16, 32, 64),
  BN: fc.constantFrom(16, 32, 64),
  groupSizeM: fc.integer({ min: 1, max: 3 }),
  schedule: fc.constantFrom("staged", "pipelined") as fc.Arbitrary<"staged" | "pipelined">,
});

describe("lowering the hierarchical templates", () => {
  it("AllGather (intra-node or inter-node first) as a consumer: checks clean, every chunk slot waited on", () => {
    fc.assert(
      fc.property(
        arb,
        fc.constantFrom("intra-node-first", "inter-node-first") as fc.Arbitrary<"intra-node-first" | "inter-node-first">,
        (c, order) => {
          const M = c.n * c.g * c.split + c.extra;
          const plan = planSignals(
            allGatherHierarchical({
              tensor: { name: "A", shape: [M, 24], dtype: "bf16" },
              axis: 0,
              mesh: [c.n, c.g],
              split: c.split,
              schedule: c.schedule,
              order,
            }),
          );
          const schedule = lowerToTileSchedule(plan, {
            tensor: "A",
            problem: { M, N: c.N, K: 24 },
            tile: { BM: c.BM, BN: c.BN, BK: 32 },
            groupSizeM: c.groupSizeM,
            persistent: { numSms: 8 },
          });
          expect(schedule.role).toBe("consumer");
          expect(checkTileSchedule(schedule, plan)).toEqual([]);
        },
      ),
      { numRuns: 30 },
    );
  });

  it("ReduceScatter (staged or pipelined) after compute as a producer: checks clean, tile arrivals counted", () => {
    fc.assert(
      fc.property(arb, (c) => {
        const M = c.n * c.g * c.split + c.extra;
        const plan = planSignals(
          reduceScatterHierarchical({
            tensor: { name: "out", shape: [M, c.N], dtype: "fp32" },
            src: "C",
            axis: 0,
            mesh: [c.n, c.g],
            split: c.split,
            schedule: c.schedule,
            afterCompute: true,
          }),
        );
        const schedule = lowerToTileSchedule(plan, { tensor: "C", problem: { M, N: c.N, K: 64 }, tile: { BM: c.BM, BN: c.BN, BK: 64 } });
        expect(schedule.role).toBe("producer");
        const arrived = applyTileArrivals(plan, schedule);
        expect(checkTileSchedule(schedule, arrived)).toEqual([]);
        for (const rs of schedule.ranks) {
          const notifies = rs.tables.notifySlot.reduce((acc, col) => acc + col.filter((s) => s >= 0).length, 0);
          expect(rs.slots.reduce((acc, s) => acc + s.arrivals, 0)).toBe(notifies);
        }
      }),
      { numRuns: 30 },
    );
  });
});
