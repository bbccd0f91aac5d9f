import { allGatherRing, allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import { add, evaluateMap } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { instantiateRows } from "../../core/manifest/rows.js";
import type { Manifest } from "../../core/manifest/schema.js";
import { builtinBody, compile } from "../../index.js";
import { parseWithPython } from "../../testing/python.js";
import { agRowsHostOps, agRowsMaps, minRowsPerRank, type AgRowsShape } from "../ag-gemm/rows.js";
import { attentionRowsGroups, checkAgAttentionRows } from "./rows.js";
import { attentionGemmView } from "./triton.js";

const D = 16;

function op(world: number, S: number, rows: { min?: number; max?: number; split?: number }, causal = true, ring = false) {
  const a = { S, heads: 2, kvHeads: 1, headDim: D, causal };
  const o = {
    tensor: { name: "kv", shape: [S, 2 * D], dtype: "bf16" as const },
    axis: 0,
    mesh: [world],
    split: rows.split ?? 2,
    side: "push" as const,
  };
  return {
    name: "attn_rows",
    kind: "ag-attention" as const,
    plan: planSignals(ring ? allGatherRing(o) : allGatherSwizzle(o)),
    body: builtinBody("flash_attention"),
    problem: attentionGemmView(a),
    attention: a,
    tile: { BM: 32, BN: 16, BK: D },
    rows,
  };
}

/**
 * Walks one rank's kv loop of a concrete manifest as the kernel does (its groups, its order), independently of the
 * compiler's check: returns the kv blocks visited, and fails when a block is read before every chunk of another
 * rank that lands rows in it (from the host ops at this length) was waited on.
 */
function walk(m: Manifest, rank: number): number[] {
  const S = m.reference.M;
  const K = m.reference.K;
  const BN = m.kernels[0]!.constexprs.BLOCK_N as number;
  const t = (name: string) => m.tables.find((x) => x.name === name)!.values[rank]!;
  const [starts, at, waits] = [t("ovl_kv_group_start"), t("ovl_kv_group_wait_at"), t("ovl_kv_group_waits")];
  const landed = new Map<number, [number, number]>();
  for (const h of m.hostOps)
    for (const s of h.streams)
      for (const o of s.ops)
        if (o.kind === "copy" && o.dst.rank === rank) landed.set(o.signal!.slot, [o.dst.offset / K, (o.dst.offset + o.dst.length) / K]);
  const m0 = (S / m.world) * rank;
  const own = (row: number) => row >= m0 && row < m0 + S / m.world;
  const have = new Set<number>();
  const tp = m.kernels[0]!.tileProgram!;
  const visited: number[] = [];
  for (let g = 0; g + 1 < starts.length; g++) {
    for (let w = at[g]!; w < at[g + 1]!; w++) {
      const [lo, hi] = landed.get(waits[w]!)!;
      for (let row = lo; row < hi; row++) have.add(row);
    }
    for (let p = starts[g]!; p < Math.min(starts[g + 1]!, tp.numPidM); p++) {
      const b = evaluateMap(tp.order, { ovl_m: p, ovl_rank: rank }, {});
      for (let row = b * BN; row < Math.min(S, (b + 1) * BN); row++) {
        if (!own(row) && !have.has(row)) throw new Error(`S=${S} rank ${rank} reads row ${row} (block ${b}) before it lands`);
      }
      visited.push(b);
    }
  }
  return visited;
}

describe("AllGather+attention for any sequence length", () => {
  it("emits one persistent kernel over the run-time length and a manifest that instantiates at every length it serves", async () => {
    const { files, manifest } = await compile(op(2, 256, { min: 132, max: 1024 }));
    const src = files[0]!.text;
    expect(src).toContain("ovl_rows");
    expect(parseWithPython({ kernel: src }).kernel).toBe("ok");
    expect(manifest.rows).toMatchObject({ range: { min: 132, max: 1024 }, multiple: 2, at: 256 });
    const args = Object.fromEntries(manifest.kernels[0]!.args.map((a) => [a.name, a.value]));
    expect(args.SQ).toEqual({ kind: "rows", divisor: 2 });
    expect(args.SKV).toEqual({ kind: "rows" });
    expect(manifest.kernels[0]!.grid).toEqual([{ kind: "num-sms", cap: (1024 / 2 / 32) * 2 }]);
    for (const S of [132, 250, 258, 1024]) {
      const m = instantiateRows(manifest, S);
      expect(m.reference).toMatchObject({ M: S, rowsPerRank: S / 2 });
      expect(m.buffers.find((b) => b.name === "attn_q")!.shape).toEqual([S / 2, 2 * D]);
      expect(m.buffers.find((b) => b.name === "kv")!.shape).toEqual([S, 2 * D]);
      const got = Object.fromEntries(m.kernels[0]!.args.map((a) => [a.name, a.value]));
      expect([got.SQ, got.SKV, got.ovl_rows]).toEqual([
        { kind: "int", value: S / 2 },
        { kind: "int", value: S },
        { kind: "int", value: S },
      ]);
      // The kernel's text is the same at every length: the group count is fixed, the tables change.
      for (let r = 0; r < 2; r++) expect(walk(m, r).sort((x, y) => x - y)).toEqual([...Array(Math.ceil(S / 16)).keys()]);
    }
    expect(() => instantiateRows(manifest, 257)).toThrow(/multiples of 2/);
    expect(() => instantiateRows(manifest, 2048)).toThrow(/132\.\.1024/);
  });

  it("refuses a ring plan, a range too short for whole kv-block chunks and a length outside its range", async () => {
    await expect(compile(op(2, 256, {}, true, true))).rejects.toThrow(/realises the all-gather-swizzle-push plan/);
    await expect(compile(op(2, 256, { min: 64, max: 512 }))).rejects.toThrow(/at least 33 rows/);
    await expect(compile(op(2, 2048, { min: 132, max: 1024 }))).rejects.toThrow(/operator's M \(2048\) must be one of the rows/);
  });

  it("property: the AllGather, the kv order, the arrival groups and the causal clipping check out at every length of any range", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 3, 4),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(16, 32, 64),
        fc.constantFrom(16, 32, 64, 128),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 60 }),
        (world, split, blockN, blockQ, lo, span) => {
          const min = world * (minRowsPerRank(split, blockN) + lo);
          const s: AgRowsShape = { world, split, blockM: blockN, K: 8, min, max: min + world * span };
          const maps = agRowsMaps(s);
          const groups = attentionRowsGroups(s, maps);
          expect(groups.count).toBe(1 + (world - 1) * split);
          expect(checkAgAttentionRows(s, maps, agRowsHostOps(s, maps, "kv"), groups, blockQ)).toBe(span + 1);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("property: at random lengths, every rank's kv loop reads each block once, after the chunks it needs land (walked independently)", async () => {
    const { manifest } = await compile(op(3, 384, { min: 3 * 36, max: 3 * 400, split: 2 }, false));
    fc.assert(
      fc.property(fc.integer({ min: 36, max: 400 }), (m) => {
        const c = instantiateRows(manifest, 3 * m);
        for (let r = 0; r < 3; r++) expect(walk(c, r).sort((x, y) => x - y)).toEqual([...Array(Math.ceil((3 * m) / 16)).keys()]);
      }),
      { numRuns: 60 },
    );
  });

  it("names the length where a plan breaks: a group started late, a wait dropped, a group that is no run of blocks", () => {
    const s: AgRowsShape = { world: 2, split: 2, blockM: 16, K: 8, min: 2 * 40, max: 2 * 60 };
    const maps = agRowsMaps(s);
    const ops = agRowsHostOps(s, maps, "kv");
    const groups = attentionRowsGroups(s, maps);
    const late = structuredClone(groups);
    late.starts[0]![1] = add(late.starts[0]![1]!, 1);
    expect(() => checkAgAttentionRows(s, maps, ops, late)).toThrow(
      /sequence of 80: rank 0 reads kv block 2 in group 0 before waiting on slot 2/,
    );
    const dropped = structuredClone(groups);
    dropped.waits[0] = [2, 2];
    expect(() => checkAgAttentionRows(s, maps, ops, dropped)).toThrow(/sequence of 80: rank 0's group 2 waits again on slot 2/);
    const firsts = structuredClone(groups);
    firsts.firsts[1]![0] = add(firsts.firsts[1]![0]!, 1);
    expect(() => checkAgAttentionRows(s, maps, ops, firsts)).toThrow(
      /sequence of 80: rank 1's group 0 visits kv block 3 at position 0, not 4/,
    );
  });
});
