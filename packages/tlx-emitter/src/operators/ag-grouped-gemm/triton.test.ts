import { allGatherRing, allGatherSwizzle, planSignals, type ChunkPlan } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Manifest } from "../../core/manifest/schema.js";
import { parseWithPython } from "../../testing/python.js";
import { EmitError } from "../../core/writer/index.js";
import { builtinBody, compile, GROUP_TABLE, tlxBackend, type ExpertRouting, type Operator } from "../../index.js";

const TILE = { BM: 32, BN: 64, BK: 32 };

function agPlan(world: number, M: number, K: number, split: number, ring = false): ChunkPlan {
  const o = { tensor: { name: "A", shape: [M, K], dtype: "bf16" as const }, axis: 0, mesh: [world], split, side: "push" as const };
  return planSignals(ring ? allGatherRing(o) : allGatherSwizzle(o));
}

function groupedOp(
  plan: ChunkPlan,
  M: number,
  N: number,
  K: number,
  groups: ExpertRouting | undefined,
  extra: Partial<Operator> = {},
): Operator {
  return {
    name: "ag_grouped",
    kind: "ag-grouped-gemm",
    plan,
    body: builtinBody("grouped_gemm"),
    problem: { M, N, K },
    tile: TILE,
    ...(groups === undefined ? {} : { groups }),
    ...extra,
  };
}

const badParam = (re: RegExp) => (e: unknown) => e instanceof EmitError && e.code === "bad-param" && re.test(e.message);

describe("compile ag-grouped-gemm", () => {
  it("compiles the built-in grouped body: the routing table, B [E, K, N], the grouped reference", async () => {
    const groups = { experts: 3, mblockExpert: [0, 0, 2, 2, 2, 0] };
    const r = await compile(groupedOp(agPlan(2, 192, 64, 2), 192, 64, 64, groups));
    expect(() => Manifest.parse(r.manifest)).not.toThrow();
    expect(parseWithPython({ k: r.files[0]!.text })).toEqual({ k: "ok" });
    const m = r.manifest;
    expect(m.tables.find((t) => t.name === GROUP_TABLE)).toEqual({
      name: GROUP_TABLE,
      dtype: "int32",
      values: [groups.mblockExpert, groups.mblockExpert],
    });
    expect(m.buffers.find((b) => b.name === "moe_b")?.shape).toEqual([3, 64, 64]);
    expect(m.buffers.find((b) => b.name === "moe_c")).toMatchObject({ shape: [192, 64], init: "poison" });
    const k = m.kernels[0]!;
    expect(k.template.kind).toBe("local-consumer");
    expect(k.template.params).toMatchObject({
      operator: "ag-grouped-gemm",
      a: "A",
      b: "moe_b",
      c: "moe_c",
      groups: GROUP_TABLE,
      experts: 3,
    });
    expect(k.args.find((a) => a.name === "group_of_mblock")?.value).toEqual({ kind: "table", name: GROUP_TABLE });
    expect(m.reference).toMatchObject({
      operator: "ag-grouped-gemm",
      inputs: { A: "A", B: "moe_b" },
      groupTable: GROUP_TABLE,
      output: "moe_c",
      rowsPerRank: 96,
    });
    // The expert is read after the wait's remap of pid_m: the inserted wait precedes the load.
    const text = r.files[0]!.text;
    expect(text.indexOf("wait_slot(")).toBeLessThan(text.indexOf("tl.load(group_of_mblock"));
  });

  it("binds the routing table to a parameter of another name through bind", async () => {
    const body = builtinBody("grouped_gemm");
    const renamed = { path: "my_grouped.py", source: body.source.replaceAll("group_of_mblock", "expert_of_block") };
    const bind = { expert_of_block: { kind: "arg" as const, arg: { kind: "table" as const, name: GROUP_TABLE } } };
    const r = await compile(
      groupedOp(agPlan(2, 128, 64, 1), 128, 64, 64, { experts: 2, mblockExpert: [1, 1, 0, 1] }, { body: renamed, bind }),
    );
    expect(r.manifest.kernels[0]!.args.find((a) => a.name === "expert_of_block")?.value).toEqual({ kind: "table", name: GROUP_TABLE });
    await expect(
      compile(groupedOp(agPlan(2, 128, 64, 1), 128, 64, 64, { experts: 2, mblockExpert: [1, 1, 0, 1] }, { body: renamed })),
    ).rejects.toSatisfy(badParam(/expert_of_block/));
  });

  it("refuses bad routing and bodies that read no routing table, with the reason", async () => {
    const plan = agPlan(2, 128, 64, 1);
    const op = (groups: ExpertRouting | undefined, extra: Partial<Operator> = {}) => compile(groupedOp(plan, 128, 64, 64, groups, extra));
    await expect(op(undefined)).rejects.toSatisfy(badParam(/needs groups: \{ experts, mblockExpert \}/));
    await expect(op({ experts: 2, mblockExpert: [0, 1, 1] })).rejects.toSatisfy(
      badParam(/has 3 entries; it needs one per m-block, M \/ BLOCK_M = 128 \/ 32 = 4/),
    );
    await expect(op({ experts: 2, mblockExpert: [0, 1, 2, 1] })).rejects.toSatisfy(
      badParam(/mblockExpert\[2\] = 2: an expert must be an integer in \[0, 2\)/),
    );
    await expect(op({ experts: 2, mblockExpert: [0, -1, 1, 1] })).rejects.toSatisfy(badParam(/mblockExpert\[1\] = -1/));
    await expect(op({ experts: 2, mblockExpert: [0, 0.5, 1, 1] })).rejects.toSatisfy(badParam(/mblockExpert\[1\] = 0.5/));
    await expect(op({ experts: 0, mblockExpert: [0, 0, 0, 0] })).rejects.toSatisfy(badParam(/experts must be a positive integer/));
    await expect(op({ experts: 1, mblockExpert: [0, 0, 0, 0] }, { tile: { BM: 48, BN: 64, BK: 32 } })).rejects.toSatisfy(
      badParam(/multiple of BLOCK_M/),
    );
    // A plain GEMM body reads no routing: refused rather than computing with B[0] alone.
    await expect(op({ experts: 1, mblockExpert: [0, 0, 0, 0] }, { body: builtinBody("gemm_tma_persistent") })).rejects.toSatisfy(
      badParam(/reads the routing table/),
    );
    await expect(op({ experts: 1, mblockExpert: [0, 0, 0, 0] }, { body: builtinBody("gemm_producer") })).rejects.toThrow(
      /grouped GEMM needs a consumer body/,
    );
    await expect(compile(groupedOp(plan, 128, 64, 64, { experts: 1, mblockExpert: [0, 0, 0, 0] }), tlxBackend())).rejects.toThrow(
      /AllGather\+GEMM and GEMM\+ReduceScatter only; compile ag-grouped-gemm/,
    );
  });

  it("every routing of every AllGather shape compiles to a valid manifest carrying it (property)", async () => {
    const shape = fc
      .record({
        world: fc.integer({ min: 2, max: 4 }),
        blocksPerRank: fc.integer({ min: 1, max: 4 }),
        split: fc.integer({ min: 1, max: 2 }),
        ring: fc.boolean(),
        experts: fc.integer({ min: 1, max: 6 }),
        mode: fc.constantFrom("random", "one-expert", "skip-one"),
        seed: fc.array(fc.nat(), { minLength: 16, maxLength: 16 }),
      })
      .map((s) => {
        const blocks = s.world * s.blocksPerRank;
        const pick = (i: number) => s.seed[i % 16]! % s.experts;
        const empty = s.experts - 1;
        const mblockExpert = Array.from({ length: blocks }, (_, i) =>
          s.mode === "one-expert" ? pick(0) : s.mode === "skip-one" ? (s.experts === 1 ? 0 : pick(i) % empty) : pick(i),
        ).sort((a, b) => a - b);
        return {
          ...s,
          M: blocks * TILE.BM,
          groups: { experts: s.experts + (s.mode === "skip-one" && s.experts === 1 ? 1 : 0), mblockExpert },
        };
      });
    await fc.assert(
      fc.asyncProperty(shape, async ({ world, M, split, ring, groups, mode }) => {
        const r = await compile(groupedOp(agPlan(world, M, 64, split, ring), M, 64, 64, groups));
        expect(() => Manifest.parse(r.manifest)).not.toThrow();
        expect(r.manifest.world).toBe(world);
        const table = r.manifest.tables.find((t) => t.name === GROUP_TABLE)!;
        expect(table.values).toEqual(Array.from({ length: world }, () => groups.mblockExpert));
        expect(r.manifest.buffers.find((b) => b.name === "moe_b")?.shape).toEqual([groups.experts, 64, 64]);
        if (mode === "skip-one") expect(groups.mblockExpert).not.toContain(groups.experts - 1);
        if (mode === "one-expert") expect(new Set(groups.mblockExpert).size).toBe(1);
      }),
      { numRuns: 25 },
    );
  });
});
