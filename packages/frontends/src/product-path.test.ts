// The frontends' plans on the product path: lowered, then compiled by @ovl/tlx-emitter's
// compile() (a dev dependency only: the emitter does not depend on this package) as
// AllGather+GEMM with the built-in TMA GEMM body.
import { planSignals } from "@ovl/chunk-plan";
import { builtinBody, compile, Manifest, type Operator } from "@ovl/tlx-emitter";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { lowerProgram } from "./commir/lower.js";
import { lowerReshard } from "./partition/lower.js";
import { replicate, shard } from "./partition/spec.js";
import { asyncTpGemm, gemmProgram } from "./search/schedules.js";

function agOp(name: string, plan: Operator["plan"], M: number, N: number, K: number): Operator {
  return {
    name,
    kind: "ag-gemm",
    plan: planSignals(plan),
    body: builtinBody("gemm_tma_persistent"),
    problem: { M, N, K },
    tile: { BM: 32, BN: 32, BK: 32 },
    groupM: 2,
  };
}

describe("frontend plans compile", () => {
  it("Mercury's async-TP GEMM (CommIR) compiles for every world: a pull ring waiting on the next rank's slot (property)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 6 }), fc.integer({ min: 1, max: 3 }), async (world, blocks) => {
        const M = world * blocks * 32;
        const plan = lowerProgram(asyncTpGemm(gemmProgram(M, 32 * world, 64, "bf16"), world), [world]).plan;
        const r = await compile(agOp("async_tp", plan, M, 32, 64));
        expect(Manifest.safeParse(r.manifest).success).toBe(true);
        const waits = r.manifest.hostOps.flatMap((h) =>
          h.streams.flatMap((s) => s.ops.flatMap((o) => (o.kind === "wait" ? [[h.rank, o.rank]] : []))),
        );
        expect(waits.length).toBe(world * (world - 2));
        for (const [r0, on] of waits) expect(on).toBe((r0! + 1) % world);
      }),
      { numRuns: 10 },
    );
  });

  it("a partition-IR reshard (row-sharded to replicated, direct path) compiles: its AllGather collective becomes pushes", async () => {
    const lowered = lowerReshard({
      tensor: { name: "X", shape: [128, 64], dtype: "bf16" },
      mesh: [4],
      before: [shard(0)],
      after: [replicate()],
      path: "direct",
    });
    expect(lowered.plan.ranks[0]!.streams[0]![0]!.kind).toBe("collective");
    const r = await compile(agOp("partition_ag", lowered.plan, 128, 64, 64));
    for (const h of r.manifest.hostOps) {
      const ops = h.streams.flatMap((s) => s.ops);
      expect(ops.every((o) => o.kind === "copy" && o.src.rank === h.rank)).toBe(true);
      expect(ops.length).toBe(3);
    }
  });
});
