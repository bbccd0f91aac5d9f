import { allReducePartitioned, allReduceTilewise, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { instantiateRows } from "../../core/manifest/rows.js";
import { builtinBody, compile } from "../../index.js";
import { parseWithPython } from "../../testing/python.js";
import { minRowsPerRank } from "../ag-gemm/rows.js";
import { rsRowsMaps, type RsRowsShape } from "../gemm-rs/rows.js";
import { arRowsWaits, checkGemmArRows } from "./rows.js";

const N = 64;
const K = 32;
const C = (M: number, world: number) => ({ tensor: { name: "C", shape: [M, N], dtype: "bf16" as const }, src: "C_partial", mesh: [world] });

function op(world: number, M: number, rows: { min?: number; max?: number }, tilewise = false) {
  const plan = planSignals(
    tilewise
      ? allReduceTilewise({ ...C(M, world), tile: [32, 32] })
      : allReducePartitioned({ ...C(M, world), axis: 0, split: 2, reduceScatter: "direct", allGather: "swizzle", afterCompute: true }),
  );
  return {
    name: "ar_rows",
    kind: "gemm-ar" as const,
    plan,
    body: builtinBody("gemm_producer"),
    problem: { M, N, K },
    tile: { BM: 32, BN: 32, BK: 32 },
    options: { backend: "sm" as const },
    rows,
  };
}

describe("GEMM+AllReduce for any row count", () => {
  it("emits the producer, the pushes and the reduce-broadcast over the run-time rows; ar_done's waits follow M", async () => {
    const { files, manifest } = await compile(op(4, 1024, { min: 260, max: 2048 }));
    const texts = Object.fromEntries(files.map((f) => [f.path, f.text]));
    expect(parseWithPython(texts)).toEqual(Object.fromEntries(files.map((f) => [f.path, "ok"])));
    expect(texts["ar_reduce_broadcast_rows.py"]).toContain("peer_notify(sig_ptrs, p, recv_base + rank, stored)");
    expect(manifest.kernels.map((k) => k.template.kind)).toEqual(["local-producer", "sm-push", "ar-reduce-broadcast-rows", "slot-wait"]);
    expect(manifest.reference).toMatchObject({ operator: "gemm-ar", M: 1024 });
    for (const M of [260, 1000, 2048]) {
      const m = instantiateRows(manifest, M);
      expect(m.buffers.find((b) => b.name === "ar_out")?.shape).toEqual([M, N]);
      // Each rank waits for the three peers' slabs: ⌈(M/4) / 32⌉ m-blocks of one 64-column tile each.
      const waits = m.tables.find((t) => t.name === "ar_done_slots")!.values;
      for (const r of waits) expect(r.filter((_, i) => i % 2 === 1)).toEqual([1, 2, 3].map(() => Math.ceil(M / 4 / 32)));
    }
  });

  it("refuses the tile-wise plan, another backend and a range too small", async () => {
    await expect(compile(op(2, 256, {}, true))).rejects.toThrow(/partitioned GEMM\+AllReduce/);
    await expect(compile({ ...op(2, 256, {}), options: { backend: "copy-engine" as const } })).rejects.toThrow(/SM pushes/);
    await expect(compile(op(2, 256, { min: 128 }))).rejects.toThrow(/M >= 130/);
  });

  it("property: the waits of ar_done check out at every M of any range; a wrong count is named with its M", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 3, 4, 8),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(16, 32, 64),
        fc.constantFrom(16, 64, 128),
        fc.integer({ min: 0, max: 40 }),
        (world, split, blockM, blockN, span) => {
          const min = world * minRowsPerRank(split, blockM);
          const s: RsRowsShape = { world, split, blockM, numPidN: 2, N: 200, min, max: min + world * span };
          const maps = rsRowsMaps(s);
          expect(checkGemmArRows(s, arRowsWaits(s, maps, blockN, 7), blockN, 7)).toBe(span + 1);
        },
      ),
      { numRuns: 30 },
    );
    const s: RsRowsShape = { world: 2, split: 2, blockM: 32, numPidN: 2, N: 64, min: 130, max: 400 };
    const maps = rsRowsMaps(s);
    // Waiting for the m-blocks of a slab, not its tiles: wrong once a slab has two column tiles.
    expect(() => checkGemmArRows(s, arRowsWaits(s, maps, 64, 9), 32, 9)).toThrow(
      /over 130 rows: rank 0 waits for 3 tiles of rank 1's slab, which stores 6/,
    );
    expect(() => checkGemmArRows(s, arRowsWaits(s, maps, 64, 9), 64, 8)).toThrow(/over 130 rows: rank 0 waits on slot 10/);
  });
});
