import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { rankGroups } from "./kv-groups.js";

describe("arrival groups of a kv loop", () => {
  it("property: groups cut the visit positions in order, wait for each needed slot once, before its first use, and only start where one is needed", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 24 }).chain((n) =>
          fc.record({
            order: fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }),
            slots: fc.array(fc.array(fc.integer({ min: -1, max: 6 }), { maxLength: 3 }), { minLength: n, maxLength: n }),
          }),
        ),
        ({ order, slots }) => {
          const g = rankGroups(
            order.length,
            (p) => order[p] as number,
            (b) => slots[b] as number[],
          );
          expect(g.starts[0]).toBe(0);
          expect([...g.starts].sort((x, y) => x - y)).toEqual(g.starts);
          expect(new Set(g.starts).size).toBe(g.starts.length);
          const waited = new Set<number>();
          g.starts.forEach((s, i) => {
            for (const x of g.waits[i] as number[]) {
              expect(x).toBeGreaterThanOrEqual(0);
              expect(waited.has(x)).toBe(false);
              waited.add(x);
            }
            if (i > 0) expect((g.waits[i] as number[]).length).toBeGreaterThan(0);
            const end = g.starts[i + 1] ?? order.length;
            for (let p = s; p < end; p++)
              for (const x of slots[order[p] as number] as number[]) if (x >= 0) expect(waited.has(x)).toBe(true);
          });
          expect(waited).toEqual(new Set(slots.flat().filter((x) => x >= 0)));
        },
      ),
      { numRuns: 200 },
    );
  });

  it("local blocks first, then one chunk a group: a group per chunk, each waiting on its slot", () => {
    // Blocks 0-1 local; blocks 2-3 from slot 5, 4 from slots 5 and 7 (it meets two chunks), 5 from 7.
    const slots = [[], [], [5], [5], [5, 7], [7]];
    const g = rankGroups(
      6,
      (p) => p,
      (b) => slots[b] as number[],
    );
    expect(g).toEqual({ starts: [0, 2, 4], waits: [[], [5], [7]] });
  });
});
