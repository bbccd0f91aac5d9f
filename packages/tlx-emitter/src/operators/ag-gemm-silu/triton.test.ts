import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compile, gemmSiluMulBody, type Operator } from "../../index.js";

function siluOp(world: number, rowsPerRank: number, split: number, N: number, K: number): Operator {
  const M = world * rowsPerRank;
  const plan = planSignals(
    allGatherSwizzle({ tensor: { name: "X", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split, side: "push" }),
  );
  return { name: "mlp_up", kind: "ag-gemm-silu", plan, body: gemmSiluMulBody(), problem: { M, N, K }, tile: { BM: 32, BN: 32, BK: 32 } };
}

describe("compile: AllGather + gate/up GEMM + SiLU-mul", () => {
  it("reads W as [K, 2N], writes Y [M, N] and checks against the ag-gemm-silu reference", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 1, max: 3 }),
        async (world, blocks, split, nBlocks) => {
          const N = nBlocks * 32;
          const K = 64;
          const { manifest, files } = await compile(siluOp(world, blocks * 32, split, N, K));
          const M = world * blocks * 32;
          expect(manifest.reference).toMatchObject({
            operator: "ag-gemm-silu",
            M,
            N,
            K,
            inputs: { A: "X", B: "gemm_b" },
            output: "gemm_c",
          });
          expect(manifest.buffers.find((b) => b.name === "gemm_b")?.shape).toEqual([K, 2 * N]);
          expect(manifest.buffers.find((b) => b.name === "gemm_c")?.shape).toEqual([M, N]);
          expect(manifest.kernels[0]?.template.params).toMatchObject({ operator: "ag-gemm-silu", N, K });
          // The body's epilogue is kept; the transformation added the waits before A is read.
          const src = files[0]!.text;
          expect(src).toContain("gate * tl.sigmoid(gate) * up");
          expect(src.indexOf("wait_slot")).toBeGreaterThan(-1);
          expect(src.indexOf("wait_slot")).toBeLessThan(src.indexOf("a_desc.load"));
        },
      ),
      { numRuns: 8 },
    );
  });
});
