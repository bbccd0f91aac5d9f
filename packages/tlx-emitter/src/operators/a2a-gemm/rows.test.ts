import { allToAll, planSignals } from "@ovl/chunk-plan";
import { constant } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { instantiateRows } from "../../core/manifest/rows.js";
import { builtinBody, compile } from "../../index.js";
import { parseWithPython } from "../../testing/python.js";
import { agRowsHostOps, agRowsMaps, minRowsPerRank, type AgRowsShape } from "../ag-gemm/rows.js";
import { a2aRowsHostOps, a2aRowsMaps, checkA2aGemmRows } from "./rows.js";

const K = 64;

function op(world: number, M: number, rows: { min?: number; max?: number; split?: number }) {
  const plan = planSignals(
    allToAll({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split: rows.split ?? 2 }),
  );
  return {
    name: "a2a_rows",
    kind: "a2a-gemm" as const,
    plan,
    body: builtinBody("gemm_tma_persistent"),
    problem: { M, N: 128, K },
    tile: { BM: 64, BN: 64, BK: 32 },
    rows,
  };
}

/** Every copy's (source rank, source row, destination rank, destination row, rows, slot) at one concrete M. */
function copies(m: ReturnType<typeof instantiateRows>) {
  return m.hostOps.flatMap((h) =>
    h.streams.flatMap((s) =>
      s.ops.flatMap((o) =>
        o.kind === "copy" ? [[o.src.rank, o.src.offset / K, o.dst.rank, o.dst.offset / K, o.src.length / K, o.signal?.slot ?? -1]] : [],
      ),
    ),
  );
}

describe("AllToAll+GEMM for any row count", () => {
  it("emits one kernel over the run-time rows and a manifest that instantiates at every M it serves", async () => {
    const { files, manifest } = await compile(op(4, 1024, { min: 520, max: 4096 }));
    const src = files[0]!.text;
    expect(src).toContain("ovl_rows");
    expect(parseWithPython({ kernel: src }).kernel).toBe("ok");
    expect(manifest.rows).toMatchObject({ range: { min: 520, max: 4096 }, multiple: 4, at: 1024 });
    expect(manifest.reference).toMatchObject({ operator: "a2a-gemm", M: 1024, inputs: { A: "A_send", B: "gemm_b" } });
    expect(manifest.kernels[0]!.args.find((a) => a.name === "M")?.value).toEqual({ kind: "rows" });
    for (const M of [520, 1000, 2052, 4096]) {
      const m = instantiateRows(manifest, M);
      expect(m.rows).toBeUndefined();
      expect(m.reference.M).toBe(M);
      for (const b of ["A", "A_send", "gemm_c"]) expect(m.buffers.find((x) => x.name === b)?.shape[0]).toBe(M);
      expect(m.kernels[0]!.args.find((a) => a.name === "M")?.value).toEqual({ kind: "int", value: M });
      // Every rank receives M rows (its own slab by a local copy); rank 0's first chunk is slab 0 of its own rows.
      const all = copies(m);
      expect(all.reduce((n, c) => n + c[4]!, 0)).toBe(4 * M);
      const slab = M / 4;
      expect(all[0]).toEqual([0, 0, 0, 0, Math.ceil(slab / 2), 0]);
      // Rank 2 gets slab 2 of rank 1's rows into its slab 1, second chunk in slot 1·2 + 1.
      const c = Math.ceil(slab / 2);
      expect(all).toContainEqual([1, 2 * slab + c, 2, slab + c, slab - c, 3]);
    }
    expect(() => instantiateRows(manifest, 1002)).toThrow(/multiples of 4/);
    expect(() => instantiateRows(manifest, 8192)).toThrow(/520\.\.4096/);
  });

  it("refuses a range too small for two whole-m-block chunks a slab, an fp8 dtype and a plan that is not an AllToAll", async () => {
    await expect(compile(op(2, 512, { min: 128, max: 1024 }))).rejects.toThrow(/at least 129 rows/);
    await expect(compile({ ...op(2, 512, {}), options: { dtype: "fp8e4m3" as const } })).rejects.toThrow(
      /a2a-gemm is not built for fp8e4m3/,
    );
    await expect(compile(op(2, 100, { min: 260, max: 1024 }))).rejects.toThrow(/operator's M \(100\) must be one of the rows/);
  });

  it("property: the AllToAll's copies and the consumer's maps check out at every M of any range", () => {
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
          const maps = a2aRowsMaps(s);
          expect(checkA2aGemmRows(s, maps, a2aRowsHostOps(s, maps, "A_send", "A"))).toBe(span + 1);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("names the row count where a plan breaks: a wrong slot, a copy from the wrong slab, AllGather+GEMM's waits", () => {
    const s: AgRowsShape = { world: 4, split: 2, blockM: 64, K: 8, min: 4 * 130, max: 4 * 140 };
    const maps = a2aRowsMaps(s);
    const ops = a2aRowsHostOps(s, maps, "A_send", "A");
    const slot = structuredClone(ops);
    slot[1]!.streams[0]!.ops[3]!.signal = { rank: 1, slot: 0 };
    expect(() => checkA2aGemmRows(s, maps, slot)).toThrow(/over 520 rows: the copy of rows .* to rank 1 signals slot 0 of rank 1/);
    const slab = structuredClone(ops);
    slab[2]!.streams[0]!.ops[2]!.src = { ...ops[2]!.streams[0]!.ops[2]!.src, offset: constant(0) };
    expect(() => checkA2aGemmRows(s, maps, slab)).toThrow(/over 520 rows: rank 2's rows .* come from rank 3's row 0, not 260/);
    // AllGather+GEMM's maps skip the own shard's chunks: here the own slab arrives by a copy and must be waited on.
    expect(() => checkA2aGemmRows(s, { ...maps, slots: agRowsMaps(s).slots }, ops)).toThrow(
      /over 520 rows: rank 0 m-block 0 waits on \[\], its rows need \[0\]/,
    );
    // AllGather's copies are pushed by their sender (and leave each rank's own rows undelivered).
    expect(() => checkA2aGemmRows(s, maps, agRowsHostOps(s, maps, "A"))).toThrow(/over 520 rows: rank 0 issues a copy into rank 3.s rows/);
  });
});
