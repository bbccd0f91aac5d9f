import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { variable } from "../expr/expr.js";
import { evaluate } from "../expr/evaluate.js";
import { toPython } from "../expr/print.js";
import { recoverRankAffine } from "./rank-affine.js";

const idx = (n: number) => variable("m", { min: 0, max: n - 1 });
const rk = (w: number) => variable("rank", { min: 0, max: w - 1 });

describe("recoverRankAffine", () => {
  it("finds the rank-rotated visit order of a swizzled AllGather", () => {
    // 4 ranks, 2 m-blocks each: rank r visits its own blocks first, then the next rank's.
    const tables = [0, 1, 2, 3].map((r) => Array.from({ length: 8 }, (_, i) => (i + 2 * r) % 8));
    const e = recoverRankAffine(tables, idx(8), rk(4));
    expect(e).toBeDefined();
    expect(toPython(e!, { dialect: "triton" })).toBe("(m + 2 * rank) % 8");
  });

  it("finds plain affine tables with a rank offset", () => {
    const tables = [0, 1, 2].map((r) => Array.from({ length: 5 }, (_, i) => 3 * i + 7 * r + 1));
    const e = recoverRankAffine(tables, idx(5), rk(3));
    expect(toPython(e!)).toBe("3 * m + 7 * rank + 1");
  });

  it("finds tables constant on runs: a chunk's slot per m-block", () => {
    // 8 ranks, 8 m-blocks a chunk: m-block m belongs to chunk m // 8, notified on slot 65 + chunk.
    const tables = Array.from({ length: 8 }, () => Array.from({ length: 64 }, (_, i) => 65 + Math.floor(i / 8)));
    const e = recoverRankAffine(tables, idx(64), rk(8));
    expect(toPython(e!, { dialect: "triton" })).toBe("m // 8 + 65");
    // Rotated by the rank, with a shorter last run (10 entries, runs of 4).
    const rotated = [0, 1, 2].map((r) => Array.from({ length: 10 }, (_, i) => (Math.floor(i / 4) + r) % 3));
    const f = recoverRankAffine(rotated, idx(10), rk(3));
    expect(f).toBeDefined();
    for (let r = 0; r < 3; r++) for (let i = 0; i < 10; i++) expect(evaluate(f!, { m: i, rank: r })).toBe(rotated[r]![i]);
  });

  it("finds a rotation of values above zero: c + (…) mod m", () => {
    const tables = [0, 1, 2, 3].map((r) => Array.from({ length: 8 }, (_, i) => 65 + ((i + 2 * r) % 8)));
    const e = recoverRankAffine(tables, idx(8), rk(4));
    expect(toPython(e!, { dialect: "triton" })).toBe("(m + 2 * rank) % 8 + 65");
  });

  it("finds an AllGather's wait slots: none on the rank's own shard, the other chunks numbered in order", () => {
    // W ranks, k chunks a shard, d m-blocks a chunk: rank r's own m-blocks wait on nothing (-1),
    // every other m-block on its chunk's slot among the other ranks' chunks.
    const slots = (w: number, k: number, d: number) =>
      Array.from({ length: w }, (_, r) =>
        Array.from({ length: w * k * d }, (_, m) => {
          const c = Math.floor(m / d);
          return Math.floor(c / k) === r ? -1 : c < k * r ? c : c - k;
        }),
      );
    for (const [w, k, d] of [
      [2, 2, 16],
      [4, 2, 8],
      [8, 2, 2],
      [8, 1, 1],
      [3, 3, 1],
    ] as const) {
      const tables = slots(w, k, d);
      const e = recoverRankAffine(tables, idx(w * k * d), rk(w));
      expect(e, `${w}x${k}x${d}`).toBeDefined();
      const text = toPython(e!, { dialect: "triton" });
      expect(text).not.toMatch(/tl\.load/);
      for (let r = 0; r < w; r++) for (let i = 0; i < w * k * d; i++) expect(evaluate(e!, { m: i, rank: r })).toBe(tables[r]![i]);
    }
    // The window must be one run of -1 of one width on every rank, at a rank-affine start.
    expect(
      recoverRankAffine(
        [
          [-1, 0, -1, 1],
          [0, -1, -1, 1],
        ],
        idx(4),
        rk(2),
      ),
    ).toBeUndefined();
    expect(
      recoverRankAffine(
        [
          [-1, -1, 0, 1],
          [0, -1, 1, 2],
        ],
        idx(4),
        rk(2),
      ),
    ).toBeUndefined();
  });

  it("a windowed fit is found and reproduces every table entry (property)", () => {
    const arb = fc.record({
      extra: fc.integer({ min: 0, max: 12 }),
      w: fc.integer({ min: 1, max: 6 }),
      width: fc.integer({ min: 1, max: 6 }),
      alpha: fc.integer({ min: 0, max: 4 }),
      beta: fc.integer({ min: 0, max: 10 }),
      a: fc.integer({ min: 0, max: 3 }),
      b: fc.integer({ min: 0, max: 9 }),
      gr: fc.integer({ min: 0, max: 2 }),
      noise: fc.option(fc.tuple(fc.nat(), fc.nat()), { nil: undefined }),
    });
    fc.assert(
      fc.property(arb, ({ extra, w, width, alpha, beta, a, b, gr, noise }) => {
        // Every window inside the table, and at least one entry outside it.
        const n = beta + alpha * (w - 1) + width + extra + 1;
        const tables = Array.from({ length: w }, (_, r) => {
          const lo = alpha * r + beta;
          return Array.from({ length: n }, (_, i) => (i >= lo && i < lo + width ? -1 : a * (i < lo ? i : i - width) + gr * r + b));
        });
        if (noise !== undefined) {
          // A second window of -1 on one rank: no windowed fit, and nothing else may claim it.
          const [r, i] = noise;
          const t = tables[r % w]!;
          const at = i % n;
          if (t[at] !== -1 && t[at - 1] !== -1 && t[at + 1] !== -1) t[at] = -1;
        }
        const e = recoverRankAffine(tables, idx(n), rk(w));
        if (noise === undefined) expect(e).toBeDefined();
        if (e !== undefined) {
          for (let r = 0; r < w; r++) for (let i = 0; i < n; i++) expect(evaluate(e, { m: i, rank: r })).toBe(tables[r]![i]);
        }
      }),
    );
  });

  it("returns undefined for runs that do not share one length", () => {
    expect(recoverRankAffine([[0, 0, 1, 1, 1, 2]], idx(6), rk(1))).toBeUndefined();
    expect(
      recoverRankAffine(
        [
          [5, 5, 7, 7],
          [5, 5, 6, 6],
        ],
        idx(4),
        rk(2),
      ),
    ).toBeUndefined();
  });

  it("returns undefined when one rank breaks the pattern", () => {
    const tables = [
      [0, 1, 2, 3],
      [2, 3, 0, 1],
      [3, 2, 1, 0],
    ];
    expect(recoverRankAffine(tables, idx(4), rk(3))).toBeUndefined();
  });

  it("returns undefined for offsets that are not affine in the rank", () => {
    const tables = [
      [0, 1],
      [5, 6],
      [6, 7],
    ];
    expect(recoverRankAffine(tables, idx(2), rk(3))).toBeUndefined();
  });

  it("refuses ragged, empty and out-of-range input", () => {
    expect(() => recoverRankAffine([], idx(1), rk(1))).toThrow(/no tables/);
    expect(() => recoverRankAffine([[1, 2], [1]], idx(2), rk(2))).toThrow(/rank 1's table/);
    expect(() => recoverRankAffine([[1, 2]], idx(3), rk(1))).toThrow(/index ranges/);
    expect(() => recoverRankAffine([[1, 2]], idx(2), rk(2))).toThrow(/rank ranges/);
    expect(() => recoverRankAffine([[1.5]], idx(1), rk(1))).toThrow(/safe integer/);
  });

  it("every expression it returns reproduces every table entry (property)", () => {
    const arb = fc.record({
      n: fc.integer({ min: 1, max: 24 }),
      w: fc.integer({ min: 1, max: 12 }),
      a: fc.integer({ min: 0, max: 5 }),
      alpha: fc.integer({ min: -6, max: 6 }),
      beta: fc.integer({ min: 0, max: 30 }),
      m: fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }),
      run: fc.integer({ min: 1, max: 5 }),
      noise: fc.option(fc.tuple(fc.nat(), fc.nat(), fc.integer({ min: 1, max: 3 })), { nil: undefined }),
    });
    fc.assert(
      fc.property(arb, ({ n, w, a, alpha, beta, m, run, noise }) => {
        const f = (i: number, r: number) => {
          const v = a * Math.floor(i / run) + alpha * r + beta;
          return m === undefined ? v : ((v % m) + m) % m;
        };
        const tables = Array.from({ length: w }, (_, r) => Array.from({ length: n }, (_, i) => f(i, r)));
        if (noise !== undefined) {
          const [r, i, d] = noise;
          tables[r % w]![i % n]! += d;
        }
        const e = recoverRankAffine(tables, idx(n), rk(w));
        if (noise === undefined && m === undefined) expect(e).toBeDefined();
        if (e !== undefined) {
          for (let r = 0; r < w; r++) for (let i = 0; i < n; i++) expect(evaluate(e, { m: i, rank: r })).toBe(tables[r]![i]);
        }
      }),
    );
  });
});
