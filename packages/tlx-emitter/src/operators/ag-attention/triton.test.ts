import { allGatherHierarchical, allGatherRing, allGatherSwizzle, planSignals, type ChunkPlan } from "@ovl/chunk-plan";
import { evaluateMap } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Manifest } from "../../core/manifest/schema.js";
import { parseWithPython } from "../../testing/python.js";
import { EmitError } from "../../core/writer/index.js";
import type { AttentionProblem } from "../../core/operator.js";
import { attentionGemmView, checkAttention } from "./triton.js";
import { compile } from "../../compile/compile.js";
import { tlxBackend } from "../../compile/backends.js";
import { builtinBody } from "../../core/builtin.js";
import { tutorialMatmulBody } from "../../examples/compiled.js";
import { groupBlockRuns } from "./kv-groups.js";

const FLASH = builtinBody("flash_attention");

function kvPlan(template: "ring" | "swizzle" | "hierarchical", world: number, S: number, cols: number, split: number): ChunkPlan {
  const tensor = { name: "kv", shape: [S, cols], dtype: "bf16" as const };
  if (template === "hierarchical") return planSignals(allGatherHierarchical({ tensor, axis: 0, mesh: [2, world / 2], split }));
  const o = { tensor, axis: 0, mesh: [world], split, side: "push" as const };
  return planSignals(template === "ring" ? allGatherRing(o) : allGatherSwizzle(o));
}

function attentionOp(a: AttentionProblem, plan: ChunkPlan, tile: { BM: number; BN: number }, extra: object = {}) {
  return {
    name: "attn",
    kind: "ag-attention" as const,
    plan,
    body: FLASH,
    problem: attentionGemmView(a),
    attention: a,
    tile: { ...tile, BK: a.headDim },
    ...extra,
  };
}

/** Per rank, the set of slots whose copies land rows of kv block `b` there (`BN` rows a block). */
function expectedWaits(m: Manifest, K: number, BN: number, blocks: number): Set<number>[][] {
  const out = Array.from({ length: m.world }, () => Array.from({ length: blocks }, () => new Set<number>()));
  for (const h of m.hostOps)
    for (const s of h.streams)
      for (const op of s.ops) {
        if (op.kind !== "copy" || op.signal === undefined) continue;
        const lo = op.dst.offset / K;
        const hi = (op.dst.offset + op.dst.length) / K;
        for (let b = Math.floor(lo / BN); b * BN < hi && b < blocks; b++) out[op.dst.rank]![b]!.add(op.signal.slot);
      }
  return out;
}

/** Per rank, the visit order and each block's waited slots, evaluated from the manifest's tile program. */
function programOf(m: Manifest): { order: number[][]; waits: Set<number>[][] } {
  const k = m.kernels[0]!;
  const tp = k.tileProgram!;
  const order: number[][] = [];
  const waits: Set<number>[][] = [];
  for (let r = 0; r < m.world; r++) {
    const tables = Object.fromEntries(m.tables.map((t) => [t.name, t.values[r]!]));
    order.push(Array.from({ length: tp.numPidM }, (_, v) => evaluateMap(tp.order, { ovl_m: v, ovl_rank: r }, tables)));
    waits.push(
      Array.from(
        { length: tp.numPidM },
        (_, b) => new Set(tp.slots.map((s) => evaluateMap(s, { ovl_m: b, ovl_rank: r }, tables)).filter((x) => x >= 0)),
      ),
    );
  }
  return { order, waits };
}

describe("compile ag-attention", () => {
  it("emits the built-in flash-attention body with kv-block waits, a persistent num-sms grid over (q-block, head) work items and the attention reference", async () => {
    const a = { S: 256, heads: 4, kvHeads: 2, headDim: 64, causal: true };
    const r = await compile(attentionOp(a, kvPlan("swizzle", 4, 256, 256, 2), { BM: 32, BN: 32 }));
    const k = r.manifest.kernels[0]!;
    expect(k.grid).toEqual([{ kind: "num-sms", cap: 2 * 4 }]);
    expect(k.constexprs).toMatchObject({ H: 4, HKV: 2, HEAD_DIM: 64, BLOCK_M: 32, BLOCK_N: 32, CAUSAL: true, sm_scale: 0.125 });
    expect(k.args.find((x) => x.name === "q_shard")?.value).toEqual({ kind: "rank" });
    expect(r.manifest.reference).toMatchObject({
      operator: "ag-attention",
      M: 256,
      N: 256,
      K: 256,
      inputs: { Q: "attn_q", KV: "kv" },
      output: "attn_o",
      rowsPerRank: 64,
      attention: { heads: 4, kvHeads: 2, headDim: 64, causal: true, scale: 0.125 },
    });
    expect(r.manifest.buffers.map((b) => [b.name, b.shape, b.symmetric])).toEqual([
      ["attn_q", [64, 256], false],
      ["kv", [256, 256], true],
      ["attn_o", [64, 256], false],
      ["signals", [expect.any(Number)], true],
    ]);
    const src = r.files[0]!.text;
    expect(src.match(/wait_slot\(/g)?.length).toBe(3); // one per kv loop (causal off-diagonal and diagonal, non-causal), before it
    // No wait inside the kv loops: each runs over one arrival group's positions.
    expect(src.match(/for it in tl\.range\(ovl_lo, tl\.minimum\(ovl_hi, num_kv\)\):/g)?.length).toBe(1);
    // The causal loops: each group clipped to its blocks below kv_diag (no mask), then to [kv_diag, kv_end); guards static.
    const first = "tl.load(ovl_kv_group_block + ovl_g)";
    expect(src).toContain(`for it in tl.range(ovl_lo, tl.minimum(tl.minimum(ovl_hi, num_kv), ovl_lo + kv_diag - ${first})):`);
    expect(src).toContain(
      `for it in tl.range(tl.maximum(ovl_lo, ovl_lo + kv_diag - ${first}), tl.minimum(tl.minimum(ovl_hi, num_kv), ovl_lo + kv_end - ${first})):`,
    );
    expect(src).not.toMatch(/if kv_blk < kv_diag:|if kv_diag <= kv_blk/);
    expect(r.manifest.tables.map((t) => t.name)).toContain("ovl_kv_group_block");
    expect(parseWithPython({ k: src }).k).toBe("ok");
  });

  it("without a tile takes 128 query rows, 64 kv rows and the head dimension", async () => {
    const a = { S: 2048, heads: 8, kvHeads: 8, headDim: 128, causal: false };
    const { tile: _t, ...op } = attentionOp(a, kvPlan("ring", 2, 2048, 2048, 2), { BM: 16, BN: 16 });
    const r = await compile(op);
    expect(r.manifest.kernels[0]!.constexprs).toMatchObject({ BLOCK_M: 128, BLOCK_N: 64, HEAD_DIM: 128 });
    expect(r.manifest.kernels[0]!.numWarps).toBe(8);
  });

  it("property: every kv block waits on exactly the chunks that land its rows, own blocks first, any AllGather template", async () => {
    const cases = fc.sample(
      fc
        .record({
          template: fc.constantFrom("ring" as const, "swizzle" as const, "hierarchical" as const),
          world: fc.constantFrom(2, 4, 6),
          rowsPerRank: fc.integer({ min: 1, max: 12 }).map((x) => 8 * x),
          split: fc.integer({ min: 1, max: 3 }),
          BN: fc.constantFrom(16, 32, 64),
          causal: fc.boolean(),
        })
        .filter((c) => c.rowsPerRank % c.split === 0),
      { numRuns: 24, seed: 15 },
    );
    for (const c of cases) {
      const a = { S: c.rowsPerRank * c.world, heads: 2, kvHeads: 1, headDim: 16, causal: c.causal };
      const K = 2 * a.kvHeads * a.headDim;
      const r = await compile(attentionOp(a, kvPlan(c.template, c.world, a.S, K, c.split), { BM: 16, BN: c.BN }));
      const blocks = Math.ceil(a.S / c.BN);
      const want = expectedWaits(r.manifest, K, c.BN, blocks);
      const got = programOf(r.manifest);
      for (let rank = 0; rank < c.world; rank++) {
        const where = `${JSON.stringify(c)} rank ${rank}`;
        expect(
          [...got.order[rank]!].sort((x, y) => x - y),
          where,
        ).toEqual(Array.from({ length: blocks }, (_, b) => b));
        for (let b = 0; b < blocks; b++)
          expect([...got.waits[rank]![b]!].sort(), `${where} block ${b}`).toEqual([...want[rank]![b]!].sort());
        // Blocks whose rows are all local are visited before any that waits.
        const firstWait = got.order[rank]!.findIndex((b) => want[rank]![b]!.size > 0);
        const local = got.order[rank]!.filter((b) => want[rank]![b]!.size === 0);
        if (firstWait >= 0) expect(got.order[rank]!.slice(0, local.length), where).toEqual(local);
        // Arrival groups: positions cut in visit order; a group waits, once, for the slots its
        // blocks need that no earlier group waited for, and a group starts only where one is needed.
        const table = (n: string) => r.manifest.tables.find((t) => t.name === n)!.values[rank]!;
        const [start, at, slots] = [table("ovl_kv_group_start"), table("ovl_kv_group_wait_at"), table("ovl_kv_group_waits")];
        expect(start[0], where).toBe(0);
        expect(start[start.length - 1], where).toBe(blocks);
        const seen = new Set<number>();
        for (let g = 0; g + 1 < start.length; g++) {
          const mine = slots.slice(at[g]!, at[g + 1]!);
          for (const x of mine) {
            expect(seen.has(x), `${where} group ${g} waits again on ${x}`).toBe(false);
            seen.add(x);
          }
          for (let p = start[g]!; p < start[g + 1]!; p++)
            for (const x of want[rank]![got.order[rank]![p]!]!) expect(seen.has(x), `${where} position ${p} needs ${x}`).toBe(true);
          if (g > 0 && start[g]! < blocks) expect(mine.length, `${where} group ${g}`).toBeGreaterThan(0);
        }
        expect(seen, where).toEqual(new Set(want[rank]!.flatMap((w) => [...w])));
        // Each group visits consecutive blocks in increasing order, so a causal bound clips it to a position range.
        const firsts = groupBlockRuns(start.slice(0, -1), blocks, (p) => got.order[rank]![p]!);
        expect(firsts, where).toBeDefined();
        expect(table("ovl_kv_group_block"), where).toEqual([...(firsts as number[]), blocks]);
      }
    }
  });

  it("refuses S that does not split over the world, before emitting anything", async () => {
    const a = { S: 100, heads: 2, kvHeads: 2, headDim: 16, causal: false };
    await expect(compile(attentionOp(a, kvPlan("swizzle", 3, 100, 64, 1), { BM: 16, BN: 16 }))).rejects.toThrow(
      /S \(100\) is not a multiple of the world \(3\).*pad it to 102/,
    );
  });

  it("refuses heads that are not a multiple of kv heads, a plan of another shape, and a problem off the attention's view", async () => {
    const a = { S: 64, heads: 3, kvHeads: 2, headDim: 16, causal: false };
    await expect(compile(attentionOp(a, kvPlan("swizzle", 2, 64, 64, 1), { BM: 16, BN: 16 }))).rejects.toThrow(/multiple of kvHeads/);
    const b = { S: 64, heads: 2, kvHeads: 2, headDim: 16, causal: false };
    await expect(compile(attentionOp(b, kvPlan("swizzle", 2, 64, 32, 1), { BM: 16, BN: 16 }))).rejects.toThrow(
      /\[S, 2·Hkv·D\] = \[64, 64\]/,
    );
    const wrong = { ...attentionOp(b, kvPlan("swizzle", 2, 64, 64, 1), { BM: 16, BN: 16 }), problem: { M: 64, N: 64, K: 32 } };
    await expect(compile(wrong)).rejects.toThrow(/attention's view/);
    const missing = { ...attentionOp(b, kvPlan("swizzle", 2, 64, 64, 1), { BM: 16, BN: 16 }), attention: undefined };
    await expect(compile(missing)).rejects.toThrow(/needs attention/);
  });

  it("refuses a GEMM body as attention, the attention body as a GEMM, and the TLX backend", async () => {
    const a = { S: 64, heads: 2, kvHeads: 2, headDim: 16, causal: false };
    const plan = kvPlan("swizzle", 2, 64, 64, 1);
    await expect(compile({ ...attentionOp(a, plan, { BM: 16, BN: 16 }), body: tutorialMatmulBody() })).rejects.toThrow(
      /tile kv=<var>.*waits per tile/,
    );
    await expect(
      compile({ name: "g", kind: "ag-gemm", plan, body: FLASH, problem: { M: 64, N: 64, K: 64 }, tile: { BM: 16, BN: 16, BK: 16 } }),
    ).rejects.toThrow(/compile it as kind ag-attention/);
    await expect(compile(attentionOp(a, plan, { BM: 16, BN: 16 }), tlxBackend())).rejects.toThrow(
      /backend tlx: the TLX backend builds AllGather\+GEMM and GEMM\+ReduceScatter only; compile ag-attention with the triton backend/,
    );
  });
});

describe("checkAttention, property", () => {
  const pow2 = (x: number) => x >= 16 && x <= 256 && (x & (x - 1)) === 0;
  it("accepts exactly the problems whose shards are equal, heads group evenly and blocks are Triton-sized", () => {
    fc.assert(
      fc.property(
        fc.record({
          S: fc.integer({ min: 1, max: 4096 }),
          heads: fc.integer({ min: 1, max: 64 }),
          kvHeads: fc.integer({ min: 1, max: 64 }),
          headDim: fc.constantFrom(8, 16, 24, 32, 64, 128, 256, 512),
          causal: fc.boolean(),
          world: fc.integer({ min: 1, max: 16 }),
          BM: fc.constantFrom(8, 16, 32, 48, 64, 128, 256),
          BN: fc.constantFrom(8, 16, 32, 64, 96, 128),
          bkIsD: fc.boolean(),
        }),
        (c) => {
          const tile = { BM: c.BM, BN: c.BN, BK: c.bkIsD ? c.headDim : c.headDim + 1 };
          const ok = c.S % c.world === 0 && c.heads % c.kvHeads === 0 && pow2(c.headDim) && pow2(c.BM) && pow2(c.BN) && c.bkIsD;
          let got: boolean;
          try {
            const a = checkAttention(c, c.world, tile);
            expect(a.scale).toBeCloseTo(1 / Math.sqrt(c.headDim), 12);
            got = true;
          } catch (e) {
            expect(e).toBeInstanceOf(EmitError);
            expect((e as EmitError).code).toBe("bad-param");
            got = false;
          }
          expect(got).toBe(ok);
        },
      ),
      { numRuns: 400 },
    );
  });
});
