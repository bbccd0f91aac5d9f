import { allGatherRing, allGatherSwizzle, planSignals, type ChunkPlan } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LocalKernelError, parseLocalKernel } from "../../local/index.js";
import { Manifest } from "../../core/manifest/schema.js";
import { parseWithPython } from "../../testing/python.js";
import { EmitError } from "../../core/writer/index.js";
import {
  builtinBody,
  compile,
  MOE_BUFFERS,
  moeAlignSizes,
  rowSegments,
  segmentMap,
  segmentOfRows,
  segmentWaits,
  type MoeRouting,
  type Operator,
} from "../../index.js";
import { segmentAt } from "./segments.js";

const TILE = { BM: 16, BN: 32, BK: 32 };

function agPlan(world: number, T: number, H: number, split: number, ring = false): ChunkPlan {
  const o = { tensor: { name: "X", shape: [T, H], dtype: "bf16" as const }, axis: 0, mesh: [world], split, side: "push" as const };
  return planSignals(ring ? allGatherRing(o) : allGatherSwizzle(o));
}

function moeOp(plan: ChunkPlan, T: number, I: number, H: number, moe: MoeRouting | undefined, extra: Partial<Operator> = {}): Operator {
  return {
    name: "ag_moe",
    kind: "ag-moe",
    plan,
    body: builtinBody("moe_gather_gemm"),
    problem: { M: T, N: I, K: H },
    tile: TILE,
    ...(moe === undefined ? {} : { moe }),
    ...extra,
  };
}

const badParam = (re: RegExp) => (e: unknown) => e instanceof EmitError && e.code === "bad-param" && re.test(e.message);

/** Per rank, per slot column, per row: random slot sets that change at random rows. */
const perRankSlots = fc
  .record({ world: fc.integer({ min: 1, max: 4 }), rows: fc.integer({ min: 1, max: 40 }), width: fc.integer({ min: 1, max: 3 }) })
  .chain(({ world, rows, width }) =>
    fc.array(
      fc.array(fc.array(fc.integer({ min: -1, max: 5 }), { minLength: rows, maxLength: rows }), { minLength: width, maxLength: width }),
      { minLength: world, maxLength: world },
    ),
  );

describe("row segments of a gathering consumer", () => {
  it("waiting on the segments from the first row's to the last row's covers exactly the rows' slots (property)", () => {
    fc.assert(
      fc.property(perRankSlots, fc.nat(), fc.nat(), (slots, a0, b0) => {
        const seg = rowSegments(slots);
        const rows = seg.rows;
        const [a, b] = [a0 % rows, b0 % rows].sort((x, y) => x - y) as [number, number];
        const built = segmentMap(seg, slots.length, "ovl_seg_of_row");
        const of = segmentOfRows(seg);
        for (let r = 0; r < rows; r++) expect(segmentAt(built, r)).toBe(of[r]);
        slots.forEach((cols, rank) => {
          const want = new Set<number>();
          for (let row = a; row <= b; row++) for (const col of cols) if ((col[row] ?? -1) >= 0) want.add(col[row] as number);
          expect([...segmentWaits(seg, (row) => of[row] as number, rank, a, b)].sort()).toEqual([...want].sort());
        });
      }),
      { numRuns: 300 },
    );
  });

  it("equal segments print as a floor division, others as a table; both nondecreasing", () => {
    const equal = rowSegments([[[0, 0, 0, 1, 1, 1, 2, 2]]]);
    expect(segmentMap(equal, 1, "t").map).toMatchObject({ kind: "static" });
    const ragged = rowSegments([[[0, 0, 1, 1, 1, 2, 2, 2]]]);
    const built = segmentMap(ragged, 2, "t");
    expect(built.map.kind).toBe("dynamic");
    expect(built.table?.values).toEqual([
      [0, 0, 1, 1, 1, 2, 2, 2],
      [0, 0, 1, 1, 1, 2, 2, 2],
    ]);
  });

  it("a segment ends where any rank's slots change", () => {
    const seg = rowSegments([[[0, 0, 1, 1]], [[-1, 2, 2, 2]]]);
    expect(seg.starts).toEqual([0, 1, 2]);
    expect(seg.slots).toEqual([[[0, 0, 1]], [[-1, 2, 2]]]);
  });
});

describe("compile ag-moe", () => {
  it("compiles the built-in body: routing kernels then the body on the compute stream, device tables, the ag-moe reference", async () => {
    const r = await compile(moeOp(agPlan(3, 100, 32, 2, true), 100, 32, 32, { experts: 4, topk: 2 }));
    expect(() => Manifest.parse(r.manifest)).not.toThrow();
    expect(parseWithPython(Object.fromEntries(r.files.map((f) => [f.path, f.text])))).toEqual({
      "ag_moe_routing.py": "ok",
      "ag_moe.py": "ok",
    });
    const m = r.manifest;
    expect(m.kernels.map((k) => [k.template.kind, k.stream])).toEqual([
      ["moe-align-count", "compute"],
      ["moe-align-scatter", "compute"],
      ["local-consumer", "compute"],
    ]);
    const sizes = moeAlignSizes(100, { experts: 4, topk: 2 }, TILE.BM);
    expect(sizes).toMatchObject({ slots: 200, maxBlocks: Math.ceil((200 + 4 * 15) / 16), expertsP2: 4, programs: 1 });
    const buf = (n: string) => m.buffers.find((b) => b.name === n);
    expect(buf(MOE_BUFFERS.topkIds)).toMatchObject({ shape: [100, 2], dtype: "int32", init: "routing", routing: { experts: 4 } });
    expect(buf(MOE_BUFFERS.sortedIds)?.shape).toEqual([sizes.maxBlocks * 16]);
    expect(buf(MOE_BUFFERS.c)).toMatchObject({ shape: [200, 32], init: "poison" });
    expect(buf("X")).toMatchObject({ shape: [100, 32], symmetric: true });
    expect(m.reference).toMatchObject({
      operator: "ag-moe",
      M: 100,
      inputs: { A: "X", B: MOE_BUFFERS.w, topk: MOE_BUFFERS.topkIds },
      rowCounts: [34, 33, 33],
    });
    const body = m.kernels[2]!;
    expect(body.tileProgram?.gather).toMatchObject({ rows: MOE_BUFFERS.sortedIds, blockRows: 16, divisor: 2, limit: 200, rowCount: 100 });
    expect(body.grid).toEqual([{ kind: "num-sms", cap: sizes.maxBlocks }]);
    const src = r.files[1]!.text;
    expect(src).toContain("ovl_ids = tl.load(sorted_token_ids + ovl_mb * 16 + tl.arange(0, 16))");
    expect(src).toContain("ovl_hi = tl.max(tl.where(ovl_ids < 200, ovl_ids, 0), axis=0) // 2");
    // The block's slots read as one vector (segments rounded up to a power of two), one reduction
    // the token; the loop of bounded waits only when a slot is short.
    const segments = Number(/ovl_vseg = tl\.minimum\(ovl_in, (\d+)\)/.exec(src)?.[1]) + 1;
    expect(segments).toBeGreaterThan(1);
    expect(src).toMatch(new RegExp(`ovl_in = .* \\+ tl\\.arange\\(0, ${2 ** Math.ceil(Math.log2(segments))}\\)\n`));
    expect(src).toMatch(
      /ovl_seen = tl\.where\(\(ovl_in < ovl_end\) & \(ovl_vslot0 >= 0\), ld_acquire_sys\(ovl_sig_ptr \+ tl\.maximum\(ovl_vslot0, 0\)\) - ovl_target, 0\)/,
    );
    expect(src).toMatch(
      / {8}ovl_short = tl\.min\(ovl_seen, axis=0\)\n {8}if ovl_short < 0:\n {12}for ovl_seg in range\(.*, ovl_end\):\n {16}ovl_slot0 = /,
    );
    expect(src).toContain("                    pid_m = consume_token(pid_m, ovl_tok)");
    expect(src).toMatch(/\n {8}pid_m = consume_token\(pid_m, ovl_short\)\n/);
    expect(src).toContain("from ovl_runtime.language import load_epoch_target, wait_slot, consume_token, ld_acquire_sys");
  });

  it("an even plan's row → segment map is a floor division printed inline", async () => {
    const r = await compile(moeOp(agPlan(2, 64, 32, 2), 64, 32, 32, { experts: 4, topk: 1 }));
    expect(r.manifest.tables.map((t) => t.name)).not.toContain("ovl_seg_of_row");
    expect(r.files[1]!.text).toContain("range(ovl_lo // 16, ovl_end)");
  });

  it("binds the expert count to a body that asks for it (E), and launches the pointer-store body with no C tile in shared memory", async () => {
    const builtin = builtinBody("moe_gather_gemm");
    const withE = { ...builtin, path: "moe_tma.py", source: builtin.source.replace("    K,\n", "    K,\n    E,\n") };
    expect(withE.source).not.toBe(builtin.source);
    const r = await compile(moeOp(agPlan(2, 64, 32, 2), 64, 32, 32, { experts: 5, topk: 2 }, { body: withE }));
    const body = r.manifest.kernels.find((k) => k.template.kind === "local-consumer")!;
    expect(body.args.find((a) => a.name === "E")?.value).toEqual({ kind: "int", value: 5 });
    // 128×256×64 bf16 stores C from registers: four 48 KiB stages fit, where a C tile in shared memory leaves three.
    const big = await compile(
      moeOp(agPlan(2, 1024, 256, 2), 1024, 256, 256, { experts: 4, topk: 2 }, { tile: { BM: 128, BN: 256, BK: 64 } }),
    );
    expect(big.manifest.kernels.find((k) => k.template.kind === "local-consumer")).toMatchObject({ numWarps: 8, numStages: 4 });
  });

  it("refuses a bad routing before emitting anything", async () => {
    const plan = agPlan(2, 64, 32, 1);
    await expect(compile(moeOp(plan, 64, 32, 32, undefined))).rejects.toSatisfy(badParam(/needs moe: \{ experts, topk \}/));
    await expect(compile(moeOp(plan, 64, 32, 32, { experts: 2, topk: 3 }))).rejects.toSatisfy(
      badParam(/moe.topk \(3\) exceeds moe.experts \(2\)/),
    );
    await expect(compile(moeOp(plan, 64, 32, 32, { experts: 4, topk: 1, choices: [0, 4] }))).rejects.toSatisfy(
      badParam(/expert 4, outside \[0, 4\)/),
    );
    await expect(compile(moeOp(plan, 64, 32, 32, { experts: 4, topk: 2, choices: [1] }))).rejects.toSatisfy(
      badParam(/moe.choices has 1 experts; each token needs topk = 2/),
    );
    await expect(compile(moeOp(plan, 64, 32, 32, { experts: 4, topk: 1, choices: [1, 1] }))).rejects.toSatisfy(badParam(/twice/));
  });

  it("refuses a body that does not read its rows through a table, and a MoE body under a per-m-block operator", async () => {
    const plan = agPlan(2, 64, 32, 1);
    await expect(compile(moeOp(plan, 64, 32, 32, { experts: 2, topk: 1 }, { body: builtinBody("grouped_gemm") }))).rejects.toSatisfy(
      badParam(/an ag-moe body is a consumer that reads its rows through the routing's index table/),
    );
    const asGemm = { ...moeOp(plan, 64, 32, 32, undefined), kind: "ag-gemm" as const };
    await expect(compile(asGemm)).rejects.toSatisfy(
      (e: unknown) =>
        e instanceof LocalKernelError &&
        e.code === "bad-program" &&
        /reads its rows through the index table sorted_token_ids/.test(e.message),
    );
  });

  it("rows= must name a tensor parameter other than the gathered one, with file:line", async () => {
    const src = builtinBody("moe_gather_gemm").source;
    const bad = async (s: string) => parseLocalKernel(s, "moe.py");
    await expect(bad(src.replace("rows=sorted_token_ids", "rows=nothing"))).rejects.toThrow(/moe.py:\d+: rows=nothing names no parameter/);
    await expect(bad(src.replace("rows=sorted_token_ids", "rows=TOP_K"))).rejects.toThrow(/rows=TOP_K is a constexpr/);
    await expect(bad(src.replace("rows=sorted_token_ids", "rows=x_ptr"))).rejects.toThrow(/is the gathered operand itself/);
    expect((await bad(src)).rows).toBe("sorted_token_ids");
    // A producer names the table it scatters its rows through the same way (moe-rs).
    const producer = builtinBody("moe_gemm_scatter").source;
    const parsed = await bad(producer);
    expect([parsed.role, parsed.operand, parsed.rows]).toEqual(["producer", "partial_ptr", "sorted_token_ids"]);
    await expect(bad(producer.replace("rows=sorted_token_ids", "rows=partial_ptr"))).rejects.toThrow(/is the scattered operand itself/);
  });
});
