import {
  collectiveDirect,
  localCopy,
  opRef,
  planSignals,
  validatePlan,
  type ChunkPlan,
  type CollectiveKind,
  type Op,
} from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EmitError } from "../core/writer/index.js";
import { decomposeCollectives, hasCollectives } from "./decompose.js";

function direct(collective: CollectiveKind, world: number, rowsPerRank: number, cols: number): ChunkPlan {
  return collectiveDirect({ tensor: { name: "T", shape: [world * rowsPerRank, cols], dtype: "fp32" }, axis: 0, mesh: [world], collective });
}

const ops = (p: ChunkPlan): Op[] => p.ranks.flatMap((r) => r.streams.flat());

describe("decomposeCollectives", () => {
  it("turns a direct AllGather into pushes of each rank's shard to every peer", () => {
    const d = decomposeCollectives(direct("all-gather", 4, 2, 3));
    expect(hasCollectives(d)).toBe(false);
    for (const r of d.ranks) {
      const mine = r.streams.flat();
      expect(mine.map((o) => (o.kind === "p2p" ? `${o.side}->${o.peer}` : o.kind)).sort()).toEqual(
        [0, 1, 2, 3]
          .filter((q) => q !== r.rank)
          .map((q) => `push->${q}`)
          .sort(),
      );
      for (const o of mine) expect(o.src).toEqual({ tensor: "T", offsets: [2 * r.rank, 0], sizes: [2, 3] });
    }
    expect(validatePlan(planSignals(d))).toEqual({ ok: true });
  });

  it("turns a direct ReduceScatter into reduceScatterDirect's ops, with compute waits when asked", () => {
    const plan = direct("reduce-scatter", 3, 2, 4);
    const d = decomposeCollectives(plan, { afterCompute: true });
    const r1 = d.ranks[1]!.streams[0]!;
    expect(r1.map((o) => o.kind)).toEqual(["local-copy", "p2p", "p2p"]);
    expect(r1.slice(1).map((o) => (o.kind === "p2p" ? [o.side, o.peer, o.reduce] : []))).toEqual([
      ["pull", 2, "sum"],
      ["pull", 0, "sum"],
    ]);
    expect(r1.every((o) => o.deps.length === 1 && o.deps[0]!.kind === "compute")).toBe(true);
    expect(validatePlan(planSignals(d))).toEqual({ ok: true });
    expect(decomposeCollectives(plan).ranks[1]!.streams[0]!.every((o) => o.deps.length === 0)).toBe(true);
  });

  it("points a dependency on a collective at every transfer that fills the rank's result", () => {
    // After the gather, each rank copies the gathered tensor elsewhere: that copy must wait
    // for every peer's push into this rank, not only this rank's own pushes (a race otherwise).
    const base = direct("all-gather", 3, 2, 2);
    const plan: ChunkPlan = {
      ...base,
      tensors: [...base.tensors, { name: "U", shape: [6, 2], dtype: "fp32" }],
      ranks: base.ranks.map((r) => ({
        ...r,
        streams: [
          [
            ...r.streams[0]!,
            localCopy(
              { tensor: "T", offsets: [0, 0], sizes: [6, 2] },
              { tensor: "U", offsets: [0, 0], sizes: [6, 2] },
              { deps: [opRef(r.rank, 0, 0)] },
            ),
          ],
        ],
      })),
    };
    expect(validatePlan(plan)).toEqual({ ok: true });
    const d = decomposeCollectives(plan);
    const copy = d.ranks[0]!.streams[0]![2]!;
    expect(copy.kind).toBe("local-copy");
    expect(copy.deps).toEqual(expect.arrayContaining([opRef(0, 0, 1), opRef(1, 0, 0), opRef(2, 0, 1)]));
    expect(validatePlan(planSignals(d))).toEqual({ ok: true });
  });

  it("refuses an all-reduce with the nearest plan that works", () => {
    const plan = collectiveDirect({ tensor: { name: "T", shape: [4, 2], dtype: "fp32" }, axis: 0, mesh: [2], collective: "all-reduce" });
    let err: unknown;
    try {
      decomposeCollectives(plan);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(EmitError);
    expect((err as EmitError).code).toBe("unsupported-op");
    expect((err as EmitError).message).toMatch(
      /all-reduce.*compile kind "gemm-ar" with allReducePartitioned\(.*\) or allReduceTilewise\(.*\)$/,
    );
  });

  it("leaves a plan without collectives as it is", () => {
    const d = decomposeCollectives(direct("all-gather", 2, 1, 1));
    expect(decomposeCollectives(d)).toBe(d);
  });

  it("yields a plan validatePlan accepts, whose symbolic execution is the same collective (property)", () => {
    fc.assert(
      fc.property(
        fc.record({
          collective: fc.constantFrom<CollectiveKind>("all-gather", "all-to-all", "reduce-scatter"),
          world: fc.integer({ min: 1, max: 6 }),
          rowsPerRank: fc.integer({ min: 1, max: 3 }),
          cols: fc.integer({ min: 1, max: 3 }),
          afterCompute: fc.boolean(),
        }),
        ({ collective, world, rowsPerRank, cols, afterCompute }) => {
          const plan = direct(collective, world, rowsPerRank, cols);
          const d = decomposeCollectives(plan, { afterCompute });
          expect(hasCollectives(d)).toBe(false);
          expect(d.claim).toEqual(plan.claim);
          // Every transfer but the own slab's copy crosses ranks: world - 1 per rank.
          expect(ops(d).filter((o) => o.kind === "p2p").length).toBe(world * (world - 1));
          // validatePlan executes the plan symbolically and checks it against the claim.
          expect(validatePlan(planSignals(d))).toEqual({ ok: true });
        },
      ),
      { numRuns: 60 },
    );
  });
});
