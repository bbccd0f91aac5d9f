// fp8 e4m3 AllGather+GEMM: the fp8 body and tile chosen, 1-byte gathered rows (every copy moves
// rows × K bytes), Bt/scales/bf16 C in the manifest and the reference, the scale epilogue in the
// kernel, and the refusals (other operators, TLX, shapes fp8 TMA cannot load).
import { allGatherRing, allGatherSwizzle, planSignals, reduceScatterDirect, type ChunkPlan } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_TOLERANCE } from "../../core/dtype.js";
import { ELEMENT_BYTES, type ElementType } from "../../core/device/index.js";
import { instantiateRows } from "../../core/manifest/rows.js";
import type { Manifest } from "../../core/manifest/schema.js";
import type { OperatorInput } from "../../core/operator.js";
import { gemmLaunchDefaults } from "../../core/options.js";
import { builtinBody, compile, compileOperator, emitAgGemm, fastestBackend, tlxBackend, tritonBackend } from "../../index.js";
import { parseWithPython } from "../../testing/python.js";
import { FP8_BODY, FP8_TILE } from "./fp8.js";

function gather(world: number, M: number, K: number, split = 2, ring = false, dtype: ElementType = "fp8e4m3"): ChunkPlan {
  const o = { tensor: { name: "A", shape: [M, K], dtype }, axis: 0, mesh: [world], split };
  return planSignals(ring ? allGatherRing({ ...o, side: "push" }) : allGatherSwizzle({ ...o, side: "push" }));
}

function agGemm(world: number, M: number, N: number, K: number, extra: Partial<OperatorInput> = {}): OperatorInput {
  return {
    name: "ag_fp8",
    kind: "ag-gemm",
    plan: gather(world, M, K),
    body: builtinBody("gemm_tma_persistent"),
    problem: { M, N, K },
    ...extra,
    options: { dtype: "fp8e4m3", ...extra.options },
  };
}

/** Every copy of `m`'s host ops, with the byte size of what it moves (its buffer's element bytes). */
function copies(m: Manifest) {
  const bytes = new Map(m.buffers.map((b) => [b.name, ELEMENT_BYTES[b.dtype as ElementType]]));
  return m.hostOps
    .flatMap((h) => h.streams.flatMap((s) => s.ops))
    .flatMap((o) => (o.kind === "copy" ? [{ ...o, bytes: o.src.length * bytes.get(o.src.buffer)! }] : []));
}

describe("fp8e4m3 AllGather+GEMM", () => {
  it("compiles the fp8 body at the fp8 tile: 1-byte A and Bt [N, K], fp32 scales, a bf16 C, the scales in the reference", async () => {
    const { result, operator, compute } = await compileOperator(agGemm(2, 1024, 256, 512));
    expect(operator.body.path).toBe(`${FP8_BODY}.py`);
    expect(operator.tile).toEqual(FP8_TILE);
    expect(compute).toMatchObject({ source: "default" });
    const m = result.manifest;
    expect(m.dtype).toBe("fp8e4m3");
    const byName = new Map(m.buffers.map((b) => [b.name, b]));
    expect(byName.get("A")).toMatchObject({ shape: [1024, 512], dtype: "fp8e4m3", symmetric: true });
    expect(byName.get("gemm_bt")).toMatchObject({ shape: [256, 512], dtype: "fp8e4m3", symmetric: false });
    expect(byName.get("gemm_c")).toMatchObject({ shape: [1024, 256], dtype: "bf16", init: "poison" });
    for (const s of ["scale_a", "scale_b"]) expect(byName.get(s)).toMatchObject({ shape: [1], dtype: "fp32", init: "replicated" });
    expect(m.reference).toMatchObject({
      operator: "ag-gemm",
      inputs: { A: "A", B: "gemm_bt", scale_a: "scale_a", scale_b: "scale_b" },
      output: "gemm_c",
      tolerance: DEFAULT_TOLERANCE.fp8e4m3,
    });
    const args = new Map(m.kernels[0]!.args.map((a) => [a.name, a.value]));
    expect(args.get("b_ptr")).toEqual({ kind: "buffer", name: "gemm_bt" });
    expect(args.get("scale_a_ptr")).toEqual({ kind: "buffer", name: "scale_a" });
    expect(args.get("scale_b_ptr")).toEqual({ kind: "buffer", name: "scale_b" });
    expect(m.kernels[0]!.template.params).toMatchObject({ b: "gemm_bt", bLayout: "nk", scaleA: "scale_a", scaleB: "scale_b" });
    // The fp8 tile keeps four stages of 1-byte A and Bt blocks beside the bf16 C tile.
    expect(m.kernels[0]!.numStages).toBe(gemmLaunchDefaults({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 128 }, "fp8e4m3").numStages);
    expect(m.kernels[0]!.numStages).toBe(4);
    const src = result.files[0]!.text;
    expect(src).toContain("bt_desc.load([offs_bn, offs_k])");
    expect(src).toContain("tl.dot(a, bt.T, acc)");
    expect(src).toContain("scale = tl.load(scale_a_ptr) * tl.load(scale_b_ptr)");
    expect(src).toContain("(acc * scale).to(out_dtype)");
    expect(parseWithPython({ kernel: src }).kernel).toBe("ok");
  });

  it("property: every copy moves rows × K × 1 bytes of A, and each rank receives every other rank's shard once", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(2, 3, 4, 8),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 4 }),
        fc.boolean(),
        async (world, blocks, split, k16, ring) => {
          const M = world * blocks * 128;
          const K = 16 * k16 * 4;
          const { manifest } = await compile(
            agGemm(world, M, 128, K, { plan: gather(world, M, K, split, ring), tile: { BM: 128, BN: 128, BK: 64 } }),
          );
          const moved = copies(manifest);
          expect(moved.length).toBeGreaterThan(0);
          for (const c of moved) {
            expect(c.src.buffer).toBe("A");
            expect(c.src.length % K).toBe(0); // whole rows
            expect(c.bytes).toBe((c.src.length / K) * K * 1);
          }
          for (let r = 0; r < world; r++) {
            const into = moved.filter((c) => c.dst.rank === r).reduce((n, c) => n + c.bytes, 0);
            expect(into).toBe((world - 1) * (M / world) * K);
          }
        },
      ),
      { numRuns: 20 },
    );
  }, 60_000);

  it("serves any row count: rows mode keeps Bt, the scales and the bf16 C, instantiated at every M", async () => {
    const { manifest } = await compile(agGemm(4, 1024, 128, 256, { tile: { BM: 64, BN: 64, BK: 64 }, rows: { min: 544, max: 4096 } }));
    expect(manifest.kernels[0]!.template.params).toMatchObject({ body: `${FP8_BODY}.py`, bLayout: "nk", scaleA: "scale_a" });
    const m = instantiateRows(manifest, 2052);
    expect(m.buffers.find((b) => b.name === "gemm_c")).toMatchObject({ shape: [2052, 128], dtype: "bf16" });
    expect(m.buffers.find((b) => b.name === "gemm_bt")).toMatchObject({ shape: [128, 256], dtype: "fp8e4m3" });
    expect(m.reference.inputs).toEqual({ A: "A", B: "gemm_bt", scale_a: "scale_a", scale_b: "scale_b" });
    const bytes = copies(m).reduce((n, c) => n + c.bytes, 0);
    expect(bytes).toBe(3 * 2052 * 256); // every rank's shard to the three others, 1 byte an element
  });

  it("refuses shapes and tiles fp8 TMA and wgmma cannot take, and the nvshmem transport", async () => {
    await expect(compile(agGemm(2, 512, 128, 200))).rejects.toThrow(/K a multiple of 16.*K is 200/);
    await expect(compile(agGemm(2, 512, 100, 256))).rejects.toThrow(/N a multiple of 8.*N is 100/);
    await expect(compile(agGemm(2, 512, 128, 256, { tile: { BM: 64, BN: 64, BK: 16 } }))).rejects.toThrow(
      /BLOCK_K a multiple of 32 \(an fp8 wgmma's K\); got 16/,
    );
    await expect(compile(agGemm(2, 512, 128, 256, { options: { dtype: "fp8e4m3", backend: "nvshmem" } }))).rejects.toThrow(
      /copy engine; drop the nvshmem backend/,
    );
  });

  it("refuses the fp8 body under another element type", async () => {
    const op = agGemm(2, 512, 128, 256, {
      body: builtinBody(FP8_BODY),
      plan: gather(2, 512, 256, 2, false, "bf16"),
      options: { dtype: "bf16" },
    });
    await expect(compile(op)).rejects.toThrow(/gemm_tma_persistent_fp8\.py takes fp8e4m3.*not bf16/);
  });

  it("other operators refuse fp8, naming AllGather+GEMM; the AG+GEMM template kernel refuses it too", async () => {
    const rs = planSignals(
      reduceScatterDirect({
        tensor: { name: "C", shape: [512, 128], dtype: "fp8e4m3" },
        src: "C_partial",
        axis: 0,
        mesh: [2],
        split: 1,
        afterCompute: true,
      }),
    );
    const op: OperatorInput = {
      name: "rs",
      kind: "gemm-rs",
      plan: rs,
      body: builtinBody("gemm_producer"),
      problem: { M: 512, N: 128, K: 256 },
      options: { dtype: "fp8e4m3" },
    };
    const err = await compile(op).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "unsupported-op",
      message: expect.stringMatching(/gemm-rs is not built for fp8e4m3.*taken by ag-gemm only/),
    });
    expect(() => emitAgGemm(gather(2, 512, 256), {} as never, { dtype: "fp8e4m3" })).toThrow(
      /template kernel takes bf16, fp16 or fp32.*not fp8e4m3/,
    );
  });

  it("the TLX backend refuses fp8 by name; the fastest backend picks Triton for it", async () => {
    const op = agGemm(2, 512, 128, 256, { tile: { BM: 128, BN: 128, BK: 128 } });
    const err = await compile(op, tlxBackend()).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "unsupported-op",
      message: expect.stringMatching(/bf16 or fp16 operands, not fp8e4m3.*triton backend/),
    });
    const { tile: _tile, ...untiled } = op;
    expect(fastestBackend().select!(untiled, "h100")).toBe(tritonBackend);
  });
});
