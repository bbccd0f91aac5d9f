import { readFileSync } from "node:fs";
import { allGatherRing, allGatherSwizzle, planSignals, reduceScatterDirect, type ChunkPlan } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Manifest } from "../core/manifest/schema.js";
import { parseWithPython } from "../testing/python.js";
import { EmitError } from "../core/writer/index.js";
import { builtinBody, compile, tlxBackend, type Operator } from "../index.js";

const TUTORIAL = {
  path: "tutorial_matmul.py",
  source: readFileSync(new URL("../../examples/user-kernels/tutorial_matmul.py", import.meta.url), "utf8"),
};
const TILE = { BM: 64, BN: 64, BK: 32 };

function agPlan(world: number, M: number, K: number, split: number, ring = false): ChunkPlan {
  const o = { tensor: { name: "A", shape: [M, K], dtype: "bf16" as const }, axis: 0, mesh: [world], split, side: "push" as const };
  return planSignals(ring ? allGatherRing(o) : allGatherSwizzle(o));
}

function agOp(plan: ChunkPlan, M: number, N: number, K: number, body = builtinBody("gemm_tma_persistent")): Operator {
  return { name: "ag_gemm", kind: "ag-gemm", plan, body, problem: { M, N, K }, tile: TILE, groupM: 2 };
}

describe("compile", () => {
  it("turns the built-in TMA body and a ring AllGather into a valid manifest and a module Python parses", async () => {
    const r = await compile(agOp(agPlan(4, 512, 64, 2, true), 512, 128, 64));
    expect(() => Manifest.parse(r.manifest)).not.toThrow();
    expect(parseWithPython({ k: r.files[0]!.text })).toEqual({ k: "ok" });
    const k = r.manifest.kernels[0]!;
    expect(k.template.kind).toBe("local-consumer");
    expect(k.args.map((a) => a.name)).toEqual(expect.arrayContaining(["a_ptr", "ovl_sig_ptr", "ovl_epoch_ptr", "ovl_rank"]));
    // Every copy of the ring is a host op; the last of each chunk writes its slot.
    expect(
      r.manifest.hostOps.flatMap((h) => h.streams.flatMap((s) => s.ops)).filter((o) => o.kind === "copy" && o.signal !== undefined).length,
    ).toBeGreaterThan(0);
  });

  it("binds the tutorial's parameters by name: strides, BLOCK_SIZE_*, NUM_SMS as the grid", async () => {
    const r = await compile(agOp(agPlan(2, 256, 64, 1), 256, 128, 64, TUTORIAL));
    const k = r.manifest.kernels[0]!;
    const arg = (n: string) => k.args.find((a) => a.name === n)?.value;
    expect(arg("stride_am")).toEqual({ kind: "int", value: 64 });
    expect(arg("stride_bn")).toEqual({ kind: "int", value: 1 });
    expect(arg("NUM_SMS")).toEqual({ kind: "num-programs" });
    expect(k.constexprs).toMatchObject({ BLOCK_SIZE_M: 64, BLOCK_SIZE_N: 64, BLOCK_SIZE_K: 32, GROUP_SIZE_M: 2 });
    expect(parseWithPython({ k: r.files[0]!.text })).toEqual({ k: "ok" });
  });

  it("prints a rank-rotated order inline and keeps irregular wait slots in a table", async () => {
    const r = await compile(agOp(agPlan(4, 512, 64, 1), 512, 128, 64));
    const text = r.files[0]!.text;
    expect(text).toContain("ovl_rank) %");
    expect(r.manifest.tables.map((t) => t.name)).not.toContain("ovl_order");
  });

  it("waits on several slots where chunks do not fall on tile boundaries", async () => {
    // 3 ranks × 96 rows, split 2: chunks of 48 rows under 64-row tiles.
    const r = await compile(agOp(agPlan(3, 288, 64, 2), 288, 64, 64));
    const waits = r.files[0]!.text.match(/wait_slot\(/g) ?? [];
    expect(waits.length).toBeGreaterThan(1);
    expect(() => Manifest.parse(r.manifest)).not.toThrow();
  });

  it("compiles GEMM+ReduceScatter from the built-in producer body", async () => {
    const plan = planSignals(
      reduceScatterDirect({
        tensor: { name: "C", shape: [256, 128], dtype: "bf16" },
        src: "C_partial",
        axis: 0,
        mesh: [2],
        split: 2,
        afterCompute: true,
      }),
    );
    const r = await compile({
      name: "gemm_rs",
      kind: "gemm-rs",
      plan,
      body: builtinBody("gemm_producer"),
      problem: { M: 256, N: 128, K: 64 },
      tile: TILE,
      groupM: 2,
    });
    expect(r.manifest.kernels.map((k) => k.template.kind)).toEqual(["local-producer", "rs-reduce"]);
    // Each tile's slot at K step 1 of the program's next tile (notifyAt "next-tile").
    expect(r.files[0]!.text).toContain("notify_slot_if(ovl_sig_ptr, ovl_prev0, ovl_due0, ovl_cnt0)");
    expect(parseWithPython(Object.fromEntries(r.files.map((f) => [f.path, f.text])))).toEqual({
      "gemm_rs_producer.py": "ok",
      "rs_reduce.py": "ok",
    });
  });

  it("refuses a body of the wrong role, a plan that does not validate, and a body TLX cannot take", async () => {
    const plan = agPlan(2, 256, 64, 1);
    await expect(compile(agOp(plan, 256, 128, 64, builtinBody("gemm_producer")))).rejects.toThrow(/needs a consumer body/);
    const broken: ChunkPlan = { ...plan, ranks: plan.ranks.map((r) => (r.rank === 0 ? { ...r, streams: [] } : r)) };
    await expect(compile(agOp(broken, 256, 128, 64))).rejects.toSatisfy((e: unknown) => e instanceof EmitError && e.code === "bad-plan");
    await expect(compile(agOp(plan, 256, 128, 64, TUTORIAL), tlxBackend())).rejects.toThrow(/cannot transform tutorial_matmul.py/);
  });

  it("every valid AllGather shape compiles to a manifest that validates (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          world: fc.integer({ min: 2, max: 6 }),
          rowsPerRank: fc.integer({ min: 1, max: 5 }).map((x) => x * 32),
          split: fc.integer({ min: 1, max: 3 }),
          ring: fc.boolean(),
        }),
        async ({ world, rowsPerRank, split, ring }) => {
          const M = world * rowsPerRank;
          const r = await compile(agOp(agPlan(world, M, 64, split, ring), M, 64, 64));
          expect(() => Manifest.parse(r.manifest)).not.toThrow();
          expect(r.manifest.world).toBe(world);
        },
      ),
      { numRuns: 25 },
    );
  });
});
