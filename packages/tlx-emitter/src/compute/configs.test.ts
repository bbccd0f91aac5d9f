import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseWithPython } from "../testing/python.js";
import { EmitError } from "../core/writer/index.js";
import {
  builtinBody,
  compile,
  COMPUTE_CONFIGS_SCHEMA,
  computeConfigs,
  DEFAULT_TILE,
  lookupComputeConfig,
  parseComputeConfigs,
  resolveCompute,
  type ComputeConfigEntry,
  type ComputeConfigTable,
  type OperatorInput,
} from "../index.js";
import { rsPlan } from "../examples/rs-plan.js";

const entry = (e: Partial<ComputeConfigEntry> & Pick<ComputeConfigEntry, "M" | "N" | "K">): ComputeConfigEntry => ({
  op: "ag-gemm",
  dtype: "bf16",
  body: "gemm_tma_persistent_flat",
  BM: 128,
  BN: 256,
  BK: 64,
  groupM: 8,
  numStages: 4,
  numWarps: 8,
  ...e,
});

const TABLE: ComputeConfigTable = parseComputeConfigs({
  $schema: COMPUTE_CONFIGS_SCHEMA,
  target: "h100",
  device: "test",
  measured: "2026-11-25",
  source: "test",
  entries: [
    entry({ M: 8192, N: 1376, K: 4096, BM: 256, BN: 128 }),
    entry({ M: 8192, N: 2752, K: 4096, BN: 128, numStages: 5, numWarps: 4, groupM: 4 }),
    entry({ M: 8192, N: 5504, K: 4096, body: "gemm_tma_persistent", numStages: 3 }),
    entry({ op: "gemm-rs", M: 8192, N: 4096, K: 1376, body: "gemm_producer_tma" }),
  ],
});

/** ag-moe entries: MoE-2 (small tiles) and MoE-1 (the default tile) of world 8. */
const MOE_ENTRIES: ComputeConfigEntry[] = [
  entry({
    op: "ag-moe",
    M: 8192,
    N: 192,
    K: 2048,
    experts: 32,
    topk: 2,
    body: "moe_gather_gemm_blocks",
    BM: 64,
    BN: 64,
    BK: 32,
    numWarps: 4,
    numStages: 3,
  }),
  entry({ op: "ag-moe", M: 8192, N: 192, K: 2048, experts: 8, topk: 2, body: "moe_gather_gemm_blocks", numStages: 4 }),
];
const MOE_TABLE: ComputeConfigTable = parseComputeConfigs({ ...TABLE, entries: [...TABLE.entries, ...MOE_ENTRIES] });

function moeOp(experts: number, topk: number, tokens = 8192, body = builtinBody("moe_gather_gemm_blocks")): OperatorInput {
  const plan = planSignals(
    allGatherSwizzle({ tensor: { name: "X", shape: [tokens, 2048], dtype: "bf16" }, axis: 0, mesh: [8], split: 2, side: "push" }),
  );
  return { name: "moe", kind: "ag-moe", plan, body, problem: { M: tokens, N: 192, K: 2048 }, moe: { experts, topk } };
}

function agOp(world: number, M: number, N: number, K: number, split = 1): OperatorInput {
  const plan = planSignals(
    allGatherSwizzle({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split, side: "push" }),
  );
  return { name: "ag", kind: "ag-gemm", plan, body: builtinBody("gemm_tma_persistent"), problem: { M, N, K } };
}

describe("the shipped configuration tables", () => {
  it("parse, name a body of the operator's family, and hold one entry per shape", () => {
    for (const target of ["h100", "h200"] as const) {
      const table = computeConfigs(target);
      expect(table?.target).toBe(target);
      const keys = table!.entries.map((e) => `${e.op} ${e.M} ${e.N} ${e.K} ${e.experts ?? ""} ${e.topk ?? ""} ${e.dtype}`);
      expect(new Set(keys).size).toBe(keys.length);
      const family = { "ag-gemm": /^gemm_tma_persistent/, "gemm-rs": /^gemm_producer/, "ag-moe": /^moe_gather_gemm/ } as const;
      for (const e of table!.entries) expect(e.body).toMatch(family[e.op]);
    }
  });

  it("give the H100 and the H200 each their own measured table; B200 has none", () => {
    expect(computeConfigs("h200")?.device).toMatch(/H200/);
    expect(computeConfigs("h100")?.device).toMatch(/H100/);
    expect(computeConfigs("b200")).toBeNull();
  });

  it("refuse a malformed table with the field that is wrong", () => {
    expect(() => parseComputeConfigs({ ...TABLE, entries: [{ ...TABLE.entries[0], body: "nope" }] })).toThrow(/entries\.0\.body/);
    // An ag-moe entry names its routing; other operators' entries name none.
    expect(() => parseComputeConfigs({ ...TABLE, entries: [{ ...MOE_ENTRIES[0], topk: undefined }] })).toThrow(/routing/);
    expect(() => parseComputeConfigs({ ...TABLE, entries: [{ ...TABLE.entries[0], experts: 8, topk: 2 }] })).toThrow(/routing/);
  });

  it("hold the H100's measured ag-moe entries of MoE-1…6, each naming the fused-MoE kernel's time beside its own", () => {
    const moe = computeConfigs("h100")!.entries.filter((e) => e.op === "ag-moe");
    expect(moe.map((e) => [e.N, e.K, e.experts, e.topk])).toEqual([
      [192, 2048, 8, 2],
      [192, 2048, 32, 2],
      [192, 2048, 32, 5],
      [256, 4096, 8, 2],
      [256, 4096, 32, 2],
      [256, 4096, 32, 5],
    ]);
    for (const e of moe) expect(e.ms! / e.fusedMoeMs!).toBeLessThan(1.06);
  });
});

describe("lookupComputeConfig", () => {
  it("returns the entry of the query's own shape", () => {
    const m = lookupComputeConfig(TABLE, { op: "ag-gemm", M: 8192, N: 2752, K: 4096, dtype: "bf16" });
    expect(m).toMatchObject({ match: "exact", distance: 0, entry: { N: 2752, numStages: 5 } });
  });

  it("takes the nearest shape in log2 distance for a shape not in the table, of the same operator", () => {
    expect(lookupComputeConfig(TABLE, { op: "ag-gemm", M: 8192, N: 2048, K: 4096, dtype: "bf16" })?.entry.N).toBe(2752);
    expect(lookupComputeConfig(TABLE, { op: "ag-gemm", M: 4096, N: 1024, K: 4096, dtype: "bf16" })?.entry.N).toBe(1376);
    expect(lookupComputeConfig(TABLE, { op: "gemm-rs", M: 512, N: 256, K: 128, dtype: "bf16" })?.entry.body).toBe("gemm_producer_tma");
  });

  it("serves fp16 from bf16 entries (same element size) and nothing for fp32", () => {
    expect(lookupComputeConfig(TABLE, { op: "ag-gemm", M: 8192, N: 1376, K: 4096, dtype: "fp16" })?.match).toBe("exact");
    expect(lookupComputeConfig(TABLE, { op: "ag-gemm", M: 8192, N: 1376, K: 4096, dtype: "fp32" })).toBeUndefined();
  });

  it("property: the answer is an entry of the operator at the least distance, and an entry finds itself", () => {
    const dim = fc.integer({ min: 64, max: 65536 });
    fc.assert(
      fc.property(fc.constantFrom("ag-gemm" as const, "gemm-rs" as const), dim, dim, dim, (op, M, N, K) => {
        const m = lookupComputeConfig(TABLE, { op, M, N, K, dtype: "bf16" })!;
        const d = (e: ComputeConfigEntry) => Math.abs(Math.log2(M / e.M)) + Math.abs(Math.log2(N / e.N)) + Math.abs(Math.log2(K / e.K));
        expect(m.entry.op).toBe(op);
        for (const e of TABLE.entries.filter((x) => x.op === op)) expect(m.distance).toBeLessThanOrEqual(d(e) + 1e-9);
      }),
    );
    for (const e of TABLE.entries) expect(lookupComputeConfig(TABLE, e)?.entry).toBe(e);
  });
});

describe("lookupComputeConfig of ag-moe", () => {
  it("matches the routing too: the same shape with another expert count takes that count's entry", () => {
    const q = { op: "ag-moe" as const, M: 8192, N: 192, K: 2048, dtype: "bf16" as const };
    expect(lookupComputeConfig(MOE_TABLE, { ...q, experts: 32, topk: 2 })).toMatchObject({ match: "exact", entry: { BM: 64 } });
    expect(lookupComputeConfig(MOE_TABLE, { ...q, experts: 8, topk: 2 })).toMatchObject({ match: "exact", entry: { BM: 128 } });
    // 16 experts: one doubling from each; the earlier entry wins the tie. 64 experts: nearest is 32.
    expect(lookupComputeConfig(MOE_TABLE, { ...q, experts: 64, topk: 2 })).toMatchObject({
      match: "nearest",
      distance: 1,
      entry: { experts: 32 },
    });
    expect(lookupComputeConfig(MOE_TABLE, { ...q, op: "ag-gemm", experts: 32, topk: 2 })?.entry.op).toBe("ag-gemm");
  });
});

describe("resolveCompute", () => {
  it("gives ag-moe its routing's tuned body, tile and launch; a user's body keeps its own; no entry: the default tile", () => {
    const r = resolveCompute(moeOp(32, 2), { table: MOE_TABLE });
    expect(r.choice).toMatchObject({ source: "table", match: "exact" });
    expect(r.op.tile).toEqual({ BM: 64, BN: 64, BK: 32 });
    expect(r.op.options).toMatchObject({ numWarps: 4, numStages: 3 });
    expect(r.op.body).toEqual(builtinBody("moe_gather_gemm_blocks"));
    // The persistent built-in body is of the same family: the entry's variant replaces it.
    expect(resolveCompute(moeOp(32, 2, 8192, builtinBody("moe_gather_gemm")), { table: MOE_TABLE }).op.body).toEqual(
      builtinBody("moe_gather_gemm_blocks"),
    );
    const user = { path: "mine.py", source: `${builtinBody("moe_gather_gemm_blocks").source}\n# my copy\n` };
    expect(resolveCompute(moeOp(32, 2, 8192, user), { table: MOE_TABLE }).op.body).toBe(user);
    expect(resolveCompute(moeOp(32, 2), { table: TABLE })).toMatchObject({
      op: { tile: { BM: 128, BN: 256, BK: 64 } },
      choice: { source: "default" },
    });
  });

  it("lets the H200 take the H100's ag-moe entries (its own table has none) and says so", () => {
    const r = resolveCompute(moeOp(32, 2), { target: "h200" });
    expect(r.choice).toMatchObject({ source: "table", target: "h100", requested: "h200", match: "exact" });
    expect(r.op.tile).toEqual({ BM: 64, BN: 64, BK: 32 });
  });

  it("keeps an operator with an explicit tile as it is", () => {
    const op = { ...agOp(2, 8192, 2752, 4096), tile: { BM: 64, BN: 64, BK: 32 } };
    const r = resolveCompute(op, { table: TABLE });
    expect(r.choice.source).toBe("explicit");
    expect(r.op).toEqual(op);
  });

  it("takes tile, grouping, warps, stages and the built-in variant from the table", () => {
    const r = resolveCompute(agOp(4, 8192, 2752, 4096), { table: TABLE });
    expect(r.choice).toMatchObject({ source: "table", match: "exact" });
    expect(r.op.tile).toEqual({ BM: 128, BN: 128, BK: 64 });
    expect(r.op.groupM).toBe(4);
    expect(r.op.options).toMatchObject({ numWarps: 4, numStages: 5 });
    expect(r.op.body).toEqual(builtinBody("gemm_tma_persistent_flat"));
  });

  it("lets the operator's own grouping, warps and stages win, and keeps a user's body", () => {
    const user = { path: "mine.py", source: builtinBody("gemm_tma_persistent").source.replace("Grouped order", "My order") };
    const r = resolveCompute({ ...agOp(4, 8192, 2752, 4096), body: user, groupM: 2, options: { numStages: 3 } }, { table: TABLE });
    expect(r.op.body).toBe(user);
    expect(r.op.groupM).toBe(2);
    expect(r.op.options).toMatchObject({ numWarps: 4, numStages: 3 });
  });

  it("falls back to the default tile without a table, and for GEMM+RS chunks finer than the tuned rows", () => {
    expect(resolveCompute(agOp(2, 512, 256, 128), { table: null })).toMatchObject({
      op: { tile: DEFAULT_TILE },
      choice: { source: "default" },
    });
    const rs: OperatorInput = {
      name: "rs",
      kind: "gemm-rs",
      plan: rsPlan(8, 1024, 4096, 2),
      body: builtinBody("gemm_producer"),
      problem: { M: 1024, N: 4096, K: 1376 },
    };
    // 1024 rows over 8 ranks in 2 chunks: 64-row chunks, not whole 128-row blocks.
    expect(resolveCompute(rs, { table: TABLE }).choice).toMatchObject({ source: "default", reason: expect.stringMatching(/128-row/) });
    expect(resolveCompute({ ...rs, plan: rsPlan(2, 1024, 4096, 2) }, { table: TABLE }).op.body).toEqual(builtinBody("gemm_producer_tma"));
  });

  it("runs a clustered TLX pick in 2x1 clusters where m-blocks and GROUP_M pair up, unclustered where not and beside SM pushes", () => {
    const clustered = parseComputeConfigs({
      ...TABLE,
      entries: TABLE.entries.map((e, i) =>
        i === 2
          ? {
              ...e,
              tlx: { consumerSchedule: "cooperative", BM: 128, BN: 256, BK: 64, groupM: 16, stages: 4, epilogueSplit: 4, clusterM: 2 },
            }
          : e,
      ),
    });
    const tlx = (op: OperatorInput) => resolveCompute(op, { table: clustered, backend: "tlx" }).op;
    // 8192 rows: 64 m-blocks of 128.
    expect(tlx(agOp(2, 8192, 5504, 4096)).warpSpecialization).toMatchObject({ clusterM: 2, epilogueSplit: 4 });
    expect(tlx(agOp(2, 8192, 5504, 4096)).groupM).toBe(16);
    // The nearest entry for 8064 rows (63 m-blocks) or for an odd GROUP_M of the operator's own: no cluster.
    expect(tlx(agOp(2, 8064, 5504, 4096)).warpSpecialization?.clusterM).toBeUndefined();
    expect(tlx({ ...agOp(2, 8192, 5504, 4096), groupM: 5 }).warpSpecialization?.clusterM).toBeUndefined();
    expect(tlx({ ...agOp(2, 8192, 5504, 4096), groupM: 5 }).warpSpecialization).toMatchObject({ epilogueSplit: 4, stages: 4 });
    // GEMM+RS: clustered over the copy engine, unclustered beside the SM push kernel.
    const rsClustered = parseComputeConfigs({
      ...TABLE,
      entries: TABLE.entries.map((e) =>
        e.op === "gemm-rs"
          ? { ...e, tlx: { consumerSchedule: "cooperative", BM: 128, BN: 256, BK: 64, groupM: 8, stages: 4, notifier: "tma", clusterM: 2 } }
          : e,
      ),
    });
    const rs = (backend: "copy-engine" | "sm"): OperatorInput => ({
      name: "rs",
      kind: "gemm-rs",
      plan: rsPlan(2, 8192, 4096, 2),
      body: builtinBody("gemm_producer"),
      problem: { M: 8192, N: 4096, K: 1376 },
      options: { backend },
    });
    const rsTlx = (backend: "copy-engine" | "sm") =>
      resolveCompute(rs(backend), { table: rsClustered, backend: "tlx" }).op.warpSpecialization;
    expect(rsTlx("copy-engine")).toMatchObject({ clusterM: 2, notifier: "tma" });
    expect(rsTlx("sm")?.clusterM).toBeUndefined();
    expect(rsTlx("sm")).toMatchObject({ notifier: "tma", stages: 4 });
  });

  it("refuses an ag-grouped-gemm without a tile", () => {
    const op: OperatorInput = { ...agOp(2, 512, 256, 128), kind: "ag-grouped-gemm", body: builtinBody("grouped_gemm") };
    expect(() => resolveCompute(op, { table: TABLE })).toThrow(EmitError);
  });
});

describe("compile() with no tile", () => {
  it("emits the tuned body variant at the tuned tile and launch, which Python parses", async () => {
    const op = agOp(2, 8192, 5504, 4096, 2);
    const { op: tuned } = resolveCompute(op);
    const r = await compile(op);
    const k = r.manifest.kernels[0]!;
    expect(k.entry).toBe(tuned.body.path.replace(/\.py$/, ""));
    expect(k.constexprs).toMatchObject({ BLOCK_M: tuned.tile.BM, BLOCK_N: tuned.tile.BN, BLOCK_K: tuned.tile.BK, GROUP_M: tuned.groupM });
    expect({ numWarps: k.numWarps, numStages: k.numStages }).toEqual({
      numWarps: tuned.options?.numWarps,
      numStages: tuned.options?.numStages,
    });
    expect(parseWithPython({ k: r.files[0]!.text })).toEqual({ k: "ok" });
  });

  it("transforms every built-in variant: consumers wait, producers notify", async () => {
    for (const body of [
      "gemm_tma_persistent_flat",
      "gemm_tma_persistent_streamk",
      "gemm_producer_tma",
      "gemm_producer_tma_flat",
    ] as const) {
      const rs = body.startsWith("gemm_producer");
      const op: OperatorInput = rs
        ? { name: "v", kind: "gemm-rs", plan: rsPlan(2, 512, 256, 2), body: builtinBody(body), problem: { M: 512, N: 256, K: 128 } }
        : { ...agOp(2, 512, 256, 128, 2), body: builtinBody(body) };
      const r = await compile({ ...op, tile: { BM: 128, BN: 128, BK: 64 } });
      const text = r.files.find((f) => f.text.includes(`def ${body}(`))!.text;
      expect(text).toMatch(rs ? /notify_slot(_gpu)?(_if)?\(/ : /wait_slot\(/);
      expect(parseWithPython({ k: text })).toEqual({ k: "ok" });
    }
  });
});
