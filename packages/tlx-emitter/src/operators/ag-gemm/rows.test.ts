import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { instantiateRows } from "../../core/manifest/rows.js";
import { builtinBody, compile } from "../../index.js";
import { parseWithPython } from "../../testing/python.js";
import { agRowsHostOps, agRowsMaps, checkAgGemmRows, minRowsPerRank, type AgRowsShape } from "./rows.js";

const K = 64;

function op(world: number, M: number, rows: { min?: number; max?: number; split?: number }) {
  const plan = planSignals(
    allGatherSwizzle({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split: rows.split ?? 2, side: "push" }),
  );
  return {
    name: "ag_rows",
    kind: "ag-gemm" as const,
    plan,
    body: builtinBody("gemm_tma_persistent"),
    problem: { M, N: 128, K },
    tile: { BM: 64, BN: 64, BK: 32 },
    rows,
  };
}

describe("AllGather+GEMM for any row count", () => {
  it("emits one kernel over the run-time rows and a manifest that instantiates at every M it serves", async () => {
    const { files, manifest } = await compile(op(4, 1024, { min: 544, max: 4096 }));
    const src = files[0]!.text;
    expect(src).toContain("ovl_rows");
    expect(src).not.toMatch(/% 16\b/); // no m-block count of one M printed in
    expect(parseWithPython({ kernel: src }).kernel).toBe("ok");
    expect(manifest.rows?.range).toEqual({ min: 544, max: 4096 });
    expect(manifest.kernels[0]!.args.find((a) => a.name === "M")?.value).toEqual({ kind: "rows" });
    for (const M of [544, 1000, 2052, 4096]) {
      const m = instantiateRows(manifest, M);
      expect(m.rows).toBeUndefined();
      expect(m.reference.M).toBe(M);
      expect(m.buffers.find((b) => b.name === "A")?.shape).toEqual([M, K]);
      expect(m.kernels[0]!.args.find((a) => a.name === "M")?.value).toEqual({ kind: "int", value: M });
      const moved = m.hostOps
        .flatMap((h) => h.streams.flatMap((s) => s.ops))
        .reduce((n, o) => n + (o.kind === "copy" ? o.src.length : 0), 0);
      expect(moved).toBe(3 * M * K); // every rank's shard to the three others
    }
    expect(() => instantiateRows(manifest, 1001)).toThrow(/multiples of 4/);
    expect(() => instantiateRows(manifest, 8192)).toThrow(/544\.\.4096/);
  });

  it("refuses a range below what two chunks per rank of whole m-blocks need, and other operators' rows", async () => {
    await expect(compile(op(2, 512, { min: 128, max: 1024 }))).rejects.toThrow(/at least 129 rows/);
    const silu = { ...op(2, 512, {}), kind: "ag-gemm-silu" as const };
    await expect(compile(silu)).rejects.toThrow(/ag-gemm-silu is compiled for one row count/);
  });

  it("property: the swizzle push plan and the consumer's maps check out at every M of any range", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 3, 4, 8),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(16, 32, 64),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 60 }),
        (world, split, blockM, lo, span) => {
          const min = world * (minRowsPerRank(split, blockM) + lo);
          const s: AgRowsShape = { world, split, blockM, K: 8, min, max: min + world * span };
          const maps = agRowsMaps(s);
          expect(checkAgGemmRows(s, maps, agRowsHostOps(s, maps, "A"))).toBe(span + 1);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("names the row count where a plan breaks", () => {
    const s: AgRowsShape = { world: 4, split: 2, blockM: 64, K: 8, min: 4 * 130, max: 4 * 140 };
    const maps = agRowsMaps(s);
    const ops = agRowsHostOps(s, maps, "A");
    const bad = structuredClone(ops);
    bad[1]!.streams[0]!.ops[3]!.signal = { rank: bad[1]!.streams[0]!.ops[3]!.signal!.rank, slot: 0 };
    expect(() => checkAgGemmRows(s, maps, bad)).toThrow(/over 520 rows: the copy of rows .* signals slot 0/);
  });
});

describe("AllGather+GEMM for any row count, on the stream-K body's configuration", () => {
  it("runs the configuration on the flattened persistent body (stream-K's split is fixed by one M's tiles)", async () => {
    const o = { ...op(4, 1024, { min: 544, max: 4096 }), body: builtinBody("gemm_tma_persistent_streamk") };
    const { manifest } = await compile(o);
    expect(manifest.kernels[0]!.template.params.body).toBe("gemm_tma_persistent_flat.py");
    expect(manifest.rows?.range).toEqual({ min: 544, max: 4096 });
  });
});
