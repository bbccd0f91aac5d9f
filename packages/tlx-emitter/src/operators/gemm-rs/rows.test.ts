import { planSignals, reduceScatterDirect, reduceScatterRing } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { instantiateRows } from "../../core/manifest/rows.js";
import { builtinBody, compile } from "../../index.js";
import { parseWithPython } from "../../testing/python.js";
import { minRowsPerRank } from "../ag-gemm/rows.js";
import { checkGemmRsRows, rsRowsMaps, rsRowsSegments, type RsRowsShape } from "./rows.js";

const N = 64;
const K = 32;

function op(world: number, M: number, rows: { min?: number; max?: number; split?: number }, ring = false) {
  const tensor = { name: "C", shape: [M, N], dtype: "bf16" as const };
  const plan = planSignals(
    ring
      ? reduceScatterRing({ tensor, src: "C_partial", axis: 0, mesh: [world], afterCompute: true })
      : reduceScatterDirect({ tensor, src: "C_partial", axis: 0, mesh: [world], split: 1, afterCompute: true }),
  );
  return {
    name: "rs_rows",
    kind: "gemm-rs" as const,
    plan,
    body: builtinBody("gemm_producer"),
    problem: { M, N, K },
    tile: { BM: 32, BN: 32, BK: 32 },
    options: { backend: "sm" as const },
    rows,
  };
}

const segmentsOf = (m: ReturnType<typeof instantiateRows>, rank: number) => {
  const v = m.tables.find((t) => t.name === "push_segments")!.values[rank]!;
  return Array.from({ length: v.length / 7 }, (_, i) => v.slice(i * 7, i * 7 + 7));
};

describe("GEMM+ReduceScatter for any row count", () => {
  it("emits one producer and one reduction over the run-time rows, and a manifest that instantiates at every M it serves", async () => {
    const { files, manifest } = await compile(op(4, 1024, { min: 4 * 65, max: 2048 }));
    const texts = Object.fromEntries(files.map((f) => [f.path, f.text]));
    expect(parseWithPython(texts)).toEqual(Object.fromEntries(files.map((f) => [f.path, "ok"])));
    expect(texts["rs_reduce_rows.py"]).toContain("ovl_rows // 4");
    expect(texts[manifest.kernels[0]!.source]).toContain("ovl_rows");
    expect(manifest.rows?.range).toEqual({ min: 260, max: 2048 });
    expect(manifest.kernels.map((k) => k.template.kind)).toEqual(["local-producer", "sm-push", "rs-reduce-rows"]);
    for (const k of [manifest.kernels[0]!, manifest.kernels[2]!]) {
      expect(k.args.some((a) => a.value.kind === "rows")).toBe(true);
    }
    for (const M of [260, 1000, 1372, 2048]) {
      const m = instantiateRows(manifest, M);
      expect(m.rows).toBeUndefined();
      expect(m.reference).toMatchObject({ M, rowsPerRank: M / 4 });
      expect(m.buffers.find((b) => b.name === "rs_out")?.shape).toEqual([M / 4, N]);
      expect(m.buffers.find((b) => b.name === "partials")?.shape).toEqual([M, N]);
      expect(m.kernels[2]!.args.find((a) => a.name === "ovl_rows")?.value).toEqual({ kind: "int", value: M });
      // Every rank pushes three peers' slabs: 3/4 of its partial product.
      for (let r = 0; r < 4; r++) expect(segmentsOf(m, r).reduce((n, s) => n + s[3]!, 0)).toBe((3 * M * N) / 4);
    }
    const short = { ...manifest.rows!, tables: { push_segments: manifest.rows!.tables!.push_segments!.map((r) => r.slice(1)) } };
    expect(() => instantiateRows({ ...manifest, rows: short }, 1000)).toThrow(/rows.tables.push_segments is not shaped like table/);
    expect(() => instantiateRows(manifest, 1002)).toThrow(/multiples of 4/);
    expect(() => instantiateRows(manifest, 4096)).toThrow(/260\.\.2048/);
  });

  it("refuses a range too small for two chunks of whole m-blocks, copy-engine deliveries, other plans and unaligned rows", async () => {
    await expect(compile(op(2, 256, { min: 128, max: 512 }))).rejects.toThrow(/at least 65 rows \(M >= 130\)/);
    await expect(compile(op(2, 256, { min: 130, max: 513 }))).rejects.toThrow(/multiples of the world/);
    await expect(compile(op(2, 256, { min: 300, max: 200 }))).rejects.toThrow(/min <= max/);
    await expect(compile(op(2, 128, { min: 130, max: 512 }))).rejects.toThrow(/operator's M \(128\)/);
    await expect(compile({ ...op(2, 256, {}), options: { backend: "copy-engine" as const } })).rejects.toThrow(/SM pushes/);
    await expect(compile(op(2, 256, {}, true))).rejects.toThrow(/reduce-scatter-direct plan/);
    await expect(compile({ ...op(2, 256, {}), problem: { M: 256, N: 60, K } })).rejects.toThrow(/multiple of 8 bf16/);
  });

  it("property: the producer's order and notifies, the pushes and the reduction's waits check out at every M of any range", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 3, 4, 8),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(16, 32, 64),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 40 }),
        (world, split, blockM, numPidN, lo, span) => {
          const min = world * (minRowsPerRank(split, blockM) + lo);
          const s: RsRowsShape = { world, split, blockM, numPidN, N: 8, min, max: min + world * span };
          const maps = rsRowsMaps(s);
          expect(checkGemmRsRows(s, maps, rsRowsSegments(s, maps), 8)).toBe(span + 1);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("names the row count where a plan breaks", () => {
    const s: RsRowsShape = { world: 4, split: 2, blockM: 64, numPidN: 2, N: 8, min: 4 * 130, max: 4 * 140 };
    const maps = rsRowsMaps(s);
    const segs = rsRowsSegments(s, maps);
    // A push signalling another chunk's slot.
    const slot = segs.map((r) => r.slice());
    const seg = slot[1]![2]!;
    slot[1]![2] = [seg[0], seg[1], seg[2], seg[3], seg[4], seg[5], slot[1]![3]![6]];
    expect(() => checkGemmRsRows(s, maps, slot)).toThrow(/over 520 rows: rank 1's push of rows .* signals slot 3/);
    // A push that waits for one tile fewer than its chunk's.
    const early = segs.map((r) => r.slice());
    const e = early[0]![0]!;
    early[0]![0] = [e[0], e[1], e[2], e[3], e[4], maps.rowsPerRank, e[6]];
    expect(() => checkGemmRsRows(s, maps, early)).toThrow(/over 520 rows: rank 0's push of rows .* waits on slot/);
    // A rank that pushes nothing.
    expect(() => checkGemmRsRows(s, maps, [segs[0]!, segs[1]!, segs[2]!, []])).toThrow(/over 520 rows: rank \d never receives rows/);
    // Notifies of the m-block's first chunk only.
    const lazy = { ...maps, notify: [maps.notify[0], maps.notify[0]] as const };
    expect(() => checkGemmRsRows(s, lazy, segs)).toThrow(/over 5\d\d rows: rank \d tile \d+ notifies/);
  });
});
