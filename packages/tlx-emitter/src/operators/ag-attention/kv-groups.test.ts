import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { clipGroup, groupBlockRuns, rankGroups } from "./kv-groups.js";

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

describe("clipping a group by a block range (causal bounds)", () => {
  it("property: clipGroup keeps exactly the positions whose block lies in the range", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 16 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: -5, max: 60 }),
        fc.integer({ min: -5, max: 60 }),
        (lo, len, first, blockLo, blockHi) => {
          const [from, to] = clipGroup(lo, lo + len, first, blockLo, blockHi);
          const want: number[] = [];
          for (let p = lo; p < lo + len; p++) {
            const b = first + (p - lo);
            if (b >= blockLo && b < blockHi) want.push(p);
          }
          const got: number[] = [];
          for (let p = from; p < to; p++) got.push(p);
          expect(got).toEqual(want);
          expect(to).toBeGreaterThanOrEqual(from);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("property: groupBlockRuns gives each group's first block exactly when its blocks are consecutive and increasing", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }).chain((chunks) =>
          fc.record({
            bpc: fc.integer({ min: 1, max: 4 }),
            chunkOrder: fc.shuffledSubarray([...Array(chunks).keys()], { minLength: chunks, maxLength: chunks }),
            swap: fc.boolean(),
          }),
        ),
        ({ bpc, chunkOrder, swap }) => {
          // A ring/swizzle visit order: whole chunks of bpc blocks, chunk by chunk.
          const order = chunkOrder.flatMap((c) => [...Array(bpc).keys()].map((i) => c * bpc + i));
          const scrambled = swap && bpc > 1;
          if (scrambled) [order[0], order[1]] = [order[1] as number, order[0] as number];
          const starts = chunkOrder.map((_, i) => i * bpc);
          const firsts = groupBlockRuns(starts, order.length, (p) => order[p] as number);
          if (scrambled) {
            expect(firsts).toBeUndefined();
            return;
          }
          expect(firsts).toEqual(chunkOrder.map((c) => c * bpc));
          starts.forEach((s, g) => {
            for (let p = s; p < s + bpc; p++) expect(order[p]).toBe((firsts?.[g] as number) + (p - s));
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("an empty padding group starts at the block count", () => {
    expect(groupBlockRuns([0, 2, 4], 4, (p) => (p + 2) % 4)).toEqual([2, 0, 4]);
  });
});
