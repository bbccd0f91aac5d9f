import { allGatherRing, allGatherSwizzle, planSignals, type ChunkPlan } from "@ovl/chunk-plan";
import { constant, mul, substitute } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { instantiateRows } from "../../core/manifest/rows.js";
import { builtinBody, compile, type Operator } from "../../index.js";
import { parseWithPython } from "../../testing/python.js";
import { agRowsHostOps } from "../ag-gemm/rows.js";
import { checkAgMoeRows, moeMinRowsPerRank, moeRowsMaps, type MoeRowsShape } from "./rows.js";

const K = 32;
const TILE = { BM: 16, BN: 32, BK: 32 };

function plan(world: number, T: number, split = 2, ring = false): ChunkPlan {
  const o = { tensor: { name: "X", shape: [T, K], dtype: "bf16" as const }, axis: 0, mesh: [world], split, side: "push" as const };
  return planSignals(ring ? allGatherRing(o) : allGatherSwizzle(o));
}

function op(
  world: number,
  T: number,
  rows: { min?: number; max?: number; split?: number },
  body: "moe_gather_gemm_blocks" | "moe_gather_gemm" = "moe_gather_gemm_blocks",
): Operator {
  return {
    name: "ag_moe_rows",
    kind: "ag-moe",
    plan: plan(world, T, rows.split ?? 2),
    body: builtinBody(body),
    problem: { M: T, N: 64, K },
    tile: TILE,
    moe: { experts: 4, topk: 2 },
    rows,
  };
}

function shape(world: number, split: number, min: number, max: number): MoeRowsShape {
  return { world, split, blockM: 16, K: 8, N: 64, blockN: 32, routing: { experts: 4, topk: 2 }, min, max };
}

function plannedAt(s: MoeRowsShape) {
  const maps = moeRowsMaps(s);
  return { maps, hostOps: agRowsHostOps(s, maps, "X"), sortedIds: constant(0) };
}

describe("AllGather + MoE for any row count", () => {
  it("emits one body over the run-time token count and a manifest that instantiates at every M it serves", async () => {
    const { files, manifest } = await compile(op(4, 256, { min: 16, max: 1024 }));
    const body = files.find((f) => f.path !== "ag_moe_rows_routing.py")!.text;
    const routing = files.find((f) => f.path === "ag_moe_rows_routing.py")!.text;
    expect(body).toContain("ovl_rows");
    // The padding sentinel and the last row are the run-time count's, not literals of one M.
    expect(body).toMatch(/ovl_ids < \(ovl_rows \* 2\)/);
    expect(parseWithPython({ kernel: body }).kernel).toBe("ok");
    expect(routing).toContain("moe_align_count_rows as moe_align_count");
    expect(manifest.rows).toMatchObject({ range: { min: 16, max: 1024 }, multiple: 4, at: 256 });
    const [count, scatter, gemm] = manifest.kernels;
    expect(count!.grid).toEqual([32]);
    expect(gemm!.args.find((a) => a.name === "M")?.value).toEqual({ kind: "rows" });
    for (const M of [16, 100, 260, 1024]) {
      const m = instantiateRows(manifest, M);
      const blocks = Math.ceil((2 * M + 4 * 15) / 16);
      expect(m.rows).toBeUndefined();
      expect(m.reference).toMatchObject({ M, rowsPerRank: M / 4 });
      const buf = (n: string) => m.buffers.find((b) => b.name === n)!.shape;
      expect([buf("X"), buf("moe_c"), buf("moe_topk_ids"), buf("moe_sorted_token_ids"), buf("moe_expert_of_block")]).toEqual([
        [M, K],
        [2 * M, 64],
        [M, 2],
        [blocks * 16],
        [blocks],
      ]);
      const arg = (k: number, n: string) => m.kernels[k]!.args.find((a) => a.name === n)?.value;
      expect(arg(1, "NUMEL")).toEqual({ kind: "int", value: 2 * M });
      expect(arg(1, "MAX_BLOCKS")).toEqual({ kind: "int", value: blocks });
      expect(arg(1, "PER")).toEqual({ kind: "int", value: Math.ceil((2 * M) / 32) });
      expect(arg(2, "M")).toEqual({ kind: "int", value: M });
      expect(arg(2, "MAX_BLOCKS")).toEqual({ kind: "int", value: blocks });
      expect(m.kernels[0]!.template.params.tokens).toBe(M);
      expect(m.kernels[0]!.constexprs).toEqual(count!.constexprs);
      expect(m.kernels[1]!.constexprs).toEqual(scatter!.constexprs);
      expect(m.kernels[2]!.grid).toEqual([blocks * 2]);
      const tp = m.kernels[2]!.tileProgram!;
      expect(tp).toMatchObject({ numPidM: blocks, gather: { limit: 2 * M, rowCount: M } });
      expect(JSON.stringify(tp.gather!.segment)).not.toContain("ovl_rows");
      // Every rank receives the other ranks' tokens: 3 · M/4 rows each.
      const rows = m.hostOps.flatMap((h) => h.streams.flatMap((s) => s.ops.map((o) => (o.kind === "copy" ? o.src.length / K : 0))));
      expect(rows.reduce((a, b) => a + b, 0)).toBe(4 * 3 * (M / 4));
    }
    expect(() => instantiateRows(manifest, 102)).toThrow(/multiples of 4/);
    expect(() => instantiateRows(manifest, 2048)).toThrow(/16\.\.1024/);
  });

  it("keeps a persistent body's grid (and so its NUM_SMS) the same at every M", async () => {
    const { manifest } = await compile(op(2, 128, { min: 64, max: 512 }, "moe_gather_gemm"));
    const gemm = manifest.kernels[2]!;
    expect(gemm.grid).toEqual([{ kind: "num-sms", cap: Math.ceil((2 * 512 + 60) / 16) * 2 }]);
    expect(instantiateRows(manifest, 66).kernels[2]!.grid).toEqual(gemm.grid);
  });

  it("refuses a ring plan, too few tokens for non-empty chunks and an M outside the range", async () => {
    await expect(compile({ ...op(2, 128, {}), plan: plan(2, 128, 2, true) })).rejects.toThrow(/all-gather-swizzle-push plan/);
    await expect(compile(op(2, 128, { min: 4, max: 512 }))).rejects.toThrow(/at least 3 rows/);
    await expect(compile(op(2, 128, { min: 256, max: 512 }))).rejects.toThrow(/operator's M \(128\) must be one of the rows/);
  });

  it("property: the gather's copies, segments, slots and routing sizes check out at every M of any range", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 2, 3, 4, 8),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 50 }),
        (world, split, lo, span) => {
          const min = world * (moeMinRowsPerRank(split) + lo);
          const s = shape(world, split, min, min + world * span);
          const { maps, hostOps } = plannedAt(s);
          const sortedIds = mul(maps.maxBlocks, 16);
          expect(checkAgMoeRows(s, maps, { hostOps, sortedIds, expertOfBlock: maps.maxBlocks })).toBe(span + 1);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("names the token count where a plan breaks: a wrong slot, a segment map of another M, a short index table", () => {
    const s = shape(4, 2, 4 * 10, 4 * 20);
    const { maps, hostOps } = plannedAt(s);
    const sortedIds = mul(maps.maxBlocks, 16);
    const ok = { hostOps, sortedIds, expertOfBlock: maps.maxBlocks };
    const slot = structuredClone(hostOps);
    slot[1]!.streams[0]!.ops[3]!.signal = { rank: 3, slot: 0 };
    expect(() => checkAgMoeRows(s, maps, { ...ok, hostOps: slot })).toThrow(/over 40 tokens: the copy of rows .* signals slot 0 of rank 3/);
    // The segment map of the range's last M (a per-M table's) is wrong at its first.
    const fixed = substitute(maps.segment, { ovl_rows: 80 });
    expect(() => checkAgMoeRows(s, { ...maps, segment: fixed }, ok)).toThrow(/over 40 tokens: token row \d+ maps to segment/);
    expect(() => checkAgMoeRows(s, maps, { ...ok, sortedIds: maps.maxBlocks })).toThrow(/over 40 tokens: index table entries/);
    expect(() => checkAgMoeRows(s, { ...maps, slot: constant(-1) }, ok)).toThrow(/rank 0 segment 2 waits on slot -1, not 2/);
  });
});
