import { planSignals, reduceScatterDirect } from "@ovl/chunk-plan";
import { constant, substitute } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { instantiateRows } from "../../core/manifest/rows.js";
import { builtinBody, compile, type Operator } from "../../index.js";
import { parseWithPython } from "../../testing/python.js";
import { checkMoeRsRows } from "./rows.js";
import { planMoeRsRows } from "./rows-compile.js";

const [H, I] = [64, 32];
const TILE = { BM: 16, BN: 32, BK: 32 };

function op(
  world: number,
  T: number,
  rows: { min?: number; max?: number },
  split = 2,
  body: "moe_gemm_scatter_ws" | "moe_gemm_scatter" = "moe_gemm_scatter_ws",
): Operator {
  const tensor = { name: "moe_slots", shape: [T * 2, H], dtype: "bf16" as const };
  const plan = planSignals(reduceScatterDirect({ tensor, src: "moe_slots_partial", axis: 0, mesh: [world], split, afterCompute: true }));
  return {
    name: "moe_rs_rows",
    kind: "moe-rs",
    plan,
    body: builtinBody(body),
    problem: { M: T, N: H, K: I },
    tile: TILE,
    moe: { experts: 4, topk: 2 },
    rows,
  };
}

const int = (
  m: { kernels: { name: string; args: { name: string; value: { kind: string; value?: unknown } }[] }[] },
  k: string,
  a: string,
) => m.kernels.find((x) => x.name === k)?.args.find((x) => x.name === a)?.value.value;

describe("MoE + ReduceScatter for any token count", () => {
  for (const body of ["moe_gemm_scatter_ws", "moe_gemm_scatter"] as const) {
    it(`${body}: one body over the run-time token count, a manifest that is the per-T compile's at every T it serves`, async () => {
      const { files, manifest } = await compile(op(4, 64, { min: 8, max: 256 }, 2, body));
      expect(manifest.rows).toMatchObject({ range: { min: 8, max: 256 }, multiple: 8, at: 64 });
      expect(manifest.signals.slots).toBe(9);
      const producer = files.find((f) => f.path.endsWith("_producer.py"))!.text;
      // The runner kernels that take sizes over T are the never-specialised ones (a new T compiles no variant).
      const runner = files.find((f) => f.path.endsWith("_moe_rs.py"))!.text;
      for (const k of ["moe_permute_rows", "moe_slab_expect", "moe_topk_reduce_rs", "moe_topk_sum"])
        expect(runner).toContain(`${k}_rows as ${k}`);
      expect(parseWithPython({ kernel: runner }).kernel).toBe("ok");
      expect(parseWithPython({ kernel: producer }).kernel).toBe("ok");
      if (body === "moe_gemm_scatter") {
        // The slab of a row and the padding sentinel are the run-time count's, not literals of one T.
        expect(producer).toContain("ovl_rows");
        expect(producer).toMatch(/< \(ovl_rows \* 2\)/);
      }
      for (const T of [8, 24, 64, 136, 256]) {
        const m = instantiateRows(manifest, T);
        const per = await compile({ ...op(4, T, {}, 2, body), rows: undefined });
        expect(m.reference).toMatchObject({ M: T, rowsPerRank: T / 4 });
        for (const k of per.manifest.kernels) {
          const got = m.kernels.find((x) => x.name === k.name)!;
          expect(got, k.name).toBeDefined();
          // The routing runs on the fixed grid of the any-T form; every other int argument is the per-T compile's.
          if (k.template.kind.startsWith("moe-align")) continue;
          for (const a of k.args)
            if (a.value.kind === "int") expect(int(m, k.name, a.name), `${T} ${k.name}.${a.name}`).toBe(a.value.value);
          if (k.grid.every((d) => typeof d === "number")) expect(got.grid, `${T} ${k.name}`).toEqual(k.grid);
        }
        const shapes = (x: typeof m) => Object.fromEntries(x.buffers.filter((b) => b.name !== "moe_counts").map((b) => [b.name, b.shape]));
        expect(shapes(m)).toEqual(shapes(per.manifest));
      }
      expect(() => instantiateRows(manifest, 12)).toThrow(/multiples of 8/);
      expect(() => instantiateRows(manifest, 264)).toThrow(/8\.\.256/);
    });
  }

  it("refuses a range of empty slabs, an operator's T outside its range and another split than the plan's", async () => {
    await expect(compile(op(4, 64, { min: 4, max: 256 }))).rejects.toThrow(/at least|multiples/);
    await expect(compile(op(4, 64, { min: 128, max: 256 }))).rejects.toThrow(/operator's M \(64\) must be one of the rows/);
    await expect(compile({ ...op(4, 64, {}), rows: { split: 1 } })).rejects.toThrow(/plan's 2 slabs per rank/);
  });

  it("property: the slabs, routing sizes, kernels and buffers check out at every T of any range", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(1, 2, 4),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 12 }),
        fc.boolean(),
        async (world, split, lo, span, ws) => {
          const slabs = world * split;
          const [min, max] = [slabs * lo, slabs * (lo + span)];
          const body = ws ? "moe_gemm_scatter_ws" : "moe_gemm_scatter";
          const p = await planMoeRsRows(op(world, min, {}, split, body), { min, max });
          expect(checkMoeRsRows(p.shape, p.maps, p.plan, p.perT)).toBe(span + 1);
        },
      ),
      { numRuns: 12 },
    );
  });

  it("names the token count where a plan breaks: a slab map of one T, a size fixed at one T, a short buffer", async () => {
    const p = await planMoeRsRows(op(2, 16, {}, 2, "moe_gemm_scatter"), { min: 4, max: 64 });
    const check = (maps = p.maps, plan = p.plan) => checkMoeRsRows(p.shape, maps, plan, p.perT);
    expect(check()).toBe(16);
    // The slab map of the range's last T (a per-T compile's) is wrong at its first.
    expect(() => check({ ...p.maps, segment: substitute(p.maps.segment, { ovl_rows: 64 }) })).toThrow(
      /over 4 tokens: the tokens fill 1 slabs, not 4|over 4 tokens: token row \d+ is in slab/,
    );
    const kernels = structuredClone(p.plan.rows.kernels!);
    kernels.moe_topk_reduce_rs!.args = { SLAB_T: constant(4) };
    expect(() => check(p.maps, { ...p.plan, rows: { ...p.plan.rows, kernels } })).toThrow(
      /over 4 tokens: moe_topk_reduce_rs's SLAB_T is 4, the per-T compile's 1/,
    );
    const dropped = structuredClone(p.plan.rows.kernels!);
    delete dropped.moe_slab_expect;
    expect(() => check(p.maps, { ...p.plan, rows: { ...p.plan.rows, kernels: dropped } })).toThrow(
      /over 4 tokens: moe_slab_expect's SLOTS/,
    );
    const buffers = { ...p.plan.rows.buffers, moe_out: p.maps.slabT };
    // A persistent grid capped at the smallest T's work leaves some of a larger T's undone.
    const ws = await planMoeRsRows(op(2, 16, {}, 2), { min: 4, max: 64 });
    const capped = ws.plan.kernels.map((k) =>
      k.name === "moe_topk_reduce_rs" ? { ...k, grid: [{ kind: "num-sms" as const, cap: 1 }] } : k,
    );
    expect(() => checkMoeRsRows(ws.shape, ws.maps, { ...ws.plan, kernels: capped }, ws.perT)).toThrow(
      /over \d+ tokens: moe_topk_reduce_rs's persistent grid\[0\] .* does not cover the per-T compile's/,
    );
    expect(() => check(p.maps, { ...p.plan, rows: { ...p.plan.rows, buffers } })).toThrow(
      /over 4 tokens: buffer moe_out has 1 rows, the per-T compile 2/,
    );
  });
});
