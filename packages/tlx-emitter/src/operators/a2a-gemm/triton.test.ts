import { allGatherSwizzle, allToAll, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EmitError } from "../../core/writer/index.js";
import { builtinBody, compile, type Operator } from "../../index.js";

const TILE = { BM: 32, BN: 32, BK: 32 };

function a2aOp(world: number, slabRows: number, split: number, K = 32, N = 32): Operator {
  const M = world * slabRows;
  const plan = planSignals(allToAll({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split }));
  return { name: "a2a_gemm", kind: "a2a-gemm", plan, body: builtinBody("gemm_tma_persistent"), problem: { M, N, K }, tile: TILE };
}

describe("compile: AllToAll + GEMM", () => {
  it("host copies put slab r of every rank's send buffer into slab q of rank r's received rows, each element once", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 5 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 3 }),
        async (world, blocks, split) => {
          const slabRows = blocks * 16;
          const K = 32;
          const { manifest } = await compile(a2aOp(world, slabRows, split, K));
          expect(manifest.reference).toMatchObject({ operator: "a2a-gemm", inputs: { A: "A_send", B: "gemm_b" } });
          expect(manifest.buffers.find((b) => b.name === "A")).toMatchObject({ init: "poison", symmetric: true });
          expect(manifest.buffers.find((b) => b.name === "A_send")).toMatchObject({ init: "random", symmetric: true });
          const slab = slabRows * K;
          for (const h of manifest.hostOps) {
            const written = new Int32Array(world * slab);
            for (const s of h.streams)
              for (const op of s.ops) {
                if (op.kind !== "copy") continue;
                expect(op.src.buffer).toBe("A_send");
                expect(op.dst).toMatchObject({ buffer: "A", rank: h.rank });
                // Rank q's slab h.rank lands in slab q, at the same offset within the slab.
                const q = op.src.rank;
                expect(op.src.offset - h.rank * slab).toBe(op.dst.offset - q * slab);
                expect(op.src.offset >= h.rank * slab && op.src.offset + op.src.length <= (h.rank + 1) * slab).toBe(true);
                for (let e = op.dst.offset; e < op.dst.offset + op.dst.length; e++) written[e]! += 1;
                expect(op.signal).toBeDefined();
              }
            expect([...written].every((n) => n === 1)).toBe(true);
          }
        },
      ),
      { numRuns: 12 },
    );
  });

  it("refuses a plan that is not a row AllToAll, naming the template that is", async () => {
    const M = 128;
    const ag = planSignals(
      allGatherSwizzle({ tensor: { name: "A", shape: [M, 32], dtype: "bf16" }, axis: 0, mesh: [2], split: 1, side: "push" }),
    );
    const err = await compile({ ...a2aOp(2, 64, 1), plan: ag }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmitError);
    expect((err as EmitError).code).toBe("bad-plan");
    expect((err as EmitError).message).toMatch(/claims all-gather along axis 0.*allToAll/);
  });

  it("the TLX backend refuses it with its reason", async () => {
    const { tlxBackend } = await import("../../index.js");
    await expect(compile(a2aOp(2, 64, 1), tlxBackend())).rejects.toThrow(/AllGather\+GEMM and GEMM\+ReduceScatter only; compile a2a-gemm/);
  });
});
