// fp16 beside bf16: every operator the torch API runs compiles for each offered element type,
// its buffers, reference and kernel arguments agreeing on it, and fp16 compiles exactly as bf16
// does (the same kernels but for the element type's name, the same grid, tables and host ops).
import {
  allGatherSwizzle,
  allReducePartitioned,
  allReduceTilewise,
  allToAll,
  planSignals,
  reduceScatterDirect,
  type ChunkPlan,
} from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_TOLERANCE, OPERATOR_DTYPES, type OperatorDtype } from "../core/dtype.js";
import { TL_DTYPE, type ElementType } from "../core/device/index.js";
import type { Manifest } from "../core/manifest/schema.js";
import type { BuiltinBodyName } from "../core/builtin.js";
import type { OperatorInput } from "../core/operator.js";
import type { EmitResult } from "../core/result.js";
import {
  attentionGemmView,
  builtinBody,
  compile,
  compileMlp,
  fastestBackend,
  gemmSiluMulBody,
  tlxBackend,
  tritonBackend,
  withSiluMulDefaults,
} from "../index.js";

/** One compiled operator of a family, at a small shape, in `dtype` (its plan's tensor too). */
type Family = (dtype: ElementType, world: number) => Promise<EmitResult>;

const TILE = { BM: 64, BN: 64, BK: 32 };
const M = 512;
const N = 128;
const K = 128;

function gather(dtype: ElementType, world: number, name: string, shape: number[], split = 2): ChunkPlan {
  return planSignals(allGatherSwizzle({ tensor: { name, shape, dtype }, axis: 0, mesh: [world], split, side: "push" }));
}

function scatter(dtype: ElementType, world: number, name: string, shape: number[]): ChunkPlan {
  const tensor = { name, shape, dtype };
  return planSignals(reduceScatterDirect({ tensor, src: `${name}_partial`, axis: 0, mesh: [world], split: 1, afterCompute: true }));
}

function gemm(kind: OperatorInput["kind"], plan: ChunkPlan, body: BuiltinBodyName, dtype: ElementType, extra: Partial<OperatorInput> = {}) {
  return {
    name: kind.replaceAll("-", "_"),
    kind,
    plan,
    body: builtinBody(body),
    problem: { M, N, K },
    tile: TILE,
    ...extra,
    options: { dtype, ...extra.options },
  } as OperatorInput;
}

/** The families the torch API compiles (and the grouped GEMM and TLX kernels beside them). */
const FAMILIES: Readonly<Record<string, Family>> = {
  "ag-gemm": (d, w) => compile(gemm("ag-gemm", gather(d, w, "A", [M, K]), "gemm_tma_persistent", d)),
  "ag-gemm-streamk": (d, w) => compile(gemm("ag-gemm", gather(d, w, "A", [M, K]), "gemm_tma_persistent_streamk", d)),
  "gemm-rs-copy-engine": (d, w) => compile(gemm("gemm-rs", scatter(d, w, "C", [M, N]), "gemm_producer", d)),
  "gemm-rs-sm": (d, w) => compile(gemm("gemm-rs", scatter(d, w, "C", [M, N]), "gemm_producer", d, { options: { backend: "sm" } })),
  "gemm-ar-partitioned": (d, w) => {
    const C = { tensor: { name: "C", shape: [M, N], dtype: d }, src: "C_partial", mesh: [w] };
    const plan = planSignals(
      allReducePartitioned({ ...C, axis: 0, split: 1, reduceScatter: "direct", allGather: "swizzle", afterCompute: true }),
    );
    return compile(gemm("gemm-ar", plan, "gemm_producer", d, { options: { backend: "sm" } }));
  },
  "gemm-ar-tilewise": (d, w) => {
    const plan = planSignals(
      allReduceTilewise({ tensor: { name: "C", shape: [M, N], dtype: d }, src: "C_partial", mesh: [w], tile: [TILE.BM, TILE.BN] }),
    );
    return compile(gemm("gemm-ar", plan, "gemm_producer", d, { options: { backend: "sm" } }));
  },
  "a2a-gemm": (d, w) => {
    const plan = planSignals(allToAll({ tensor: { name: "A", shape: [M, K], dtype: d }, axis: 0, mesh: [w], split: 1 }));
    return compile(gemm("a2a-gemm", plan, "gemm_tma_persistent", d));
  },
  "ag-grouped-gemm": (d, w) =>
    compile(
      gemm("ag-grouped-gemm", gather(d, w, "A", [M, K]), "grouped_gemm", d, {
        groups: { experts: 2, mblockExpert: Array.from({ length: M / TILE.BM }, (_, i) => i % 2) },
      }),
    ),
  "ag-moe": (d, w) => compile(gemm("ag-moe", gather(d, w, "X", [M, K]), "moe_gather_gemm_blocks", d, { moe: { experts: 4, topk: 2 } })),
  "moe-rs": (d, w) =>
    compile({
      ...gemm("moe-rs", scatter(d, w, "moe_slots", [M * 2, N]), "moe_gemm_scatter", d, { moe: { experts: 4, topk: 2 } }),
      problem: { M, N, K },
    }),
  "ag-attention": (d, w) => {
    const attention = { S: M, heads: 4, kvHeads: 2, headDim: 64, causal: true };
    const view = attentionGemmView(attention);
    return compile({
      name: "ag_attention",
      kind: "ag-attention",
      plan: gather(d, w, "kv", [M, view.K]),
      body: builtinBody("flash_attention"),
      problem: view,
      attention,
      tile: { BM: 64, BN: 64, BK: 64 },
      options: { dtype: d },
    });
  },
  "ag-gemm-silu": (d, w) =>
    compile(
      withSiluMulDefaults({
        name: "ag_gemm_silu",
        kind: "ag-gemm-silu",
        plan: gather(d, w, "X", [M, K]),
        body: gemmSiluMulBody(),
        problem: { M, N, K },
        options: { dtype: d },
      }),
    ),
  "tlx-ag-gemm": (d, w) =>
    compile(gemm("ag-gemm", gather(d, w, "A", [M, K], 1), "gemm_tma_persistent", d, { tile: { BM: 128, BN: 128, BK: 64 } }), tlxBackend()),
  "tlx-gemm-rs": (d, w) =>
    compile(gemm("gemm-rs", scatter(d, w, "C", [M, N]), "gemm_producer", d, { tile: { BM: 128, BN: 128, BK: 64 } }), tlxBackend()),
};

const FLOATING = new Set<string>(["bf16", "fp16", "fp32"]);
/** The 2-byte types every family takes (fp8e4m3 is AllGather+GEMM's alone: `fp8.test.ts`). */
const TWO_BYTE = ["bf16", "fp16"] as const satisfies readonly OperatorDtype[];
const OTHER: Readonly<Record<(typeof TWO_BYTE)[number], ElementType>> = { bf16: "fp16", fp16: "bf16" };

/** What must hold of an operator compiled for `dtype`. */
function agreesOn(r: EmitResult, dtype: (typeof TWO_BYTE)[number], family: string): void {
  const m = r.manifest;
  expect(m.dtype, family).toBe(dtype);
  expect(m.reference.tolerance, family).toBe(DEFAULT_TOLERANCE[dtype]);
  const buffers = new Map(m.buffers.map((b) => [b.name, b]));
  // Floating buffers are the operator's element type, or fp32 scratch (stream-K partials, MoE's top-k weights); never the other 2-byte type.
  for (const b of m.buffers) if (FLOATING.has(b.dtype)) expect([dtype, "fp32"], `${family} ${b.name}`).toContain(b.dtype);
  // The reference reads and writes the element type (but MoE's fp32 top-k weights).
  for (const [role, name] of [...Object.entries(m.reference.inputs), ["output", m.reference.output] as const]) {
    const b = buffers.get(name);
    expect(b, `${family} reference ${role}`).toBeDefined();
    if (role !== "weights" && role !== "topk") expect(b!.dtype, `${family} reference ${role} ${name}`).toBe(dtype);
  }
  // Every buffer a kernel takes exists, and those the reference names are the element type; no kernel names the other 2-byte type.
  for (const k of m.kernels) {
    for (const a of k.args) {
      if (a.value.kind !== "buffer") continue;
      const b = buffers.get(a.value.name);
      expect(b, `${family} ${k.name}.${a.name}`).toBeDefined();
      const named = [...Object.values(m.reference.inputs), m.reference.output].includes(b!.name);
      if (named && FLOATING.has(b!.dtype) && b!.dtype !== "fp32") expect(b!.dtype, `${family} ${k.name}.${a.name}`).toBe(dtype);
    }
  }
  for (const f of r.files) expect(f.text.includes(TL_DTYPE[OTHER[dtype]]), `${family} ${f.path}`).toBe(false);
}

/** `m` with its element type and tolerance written as bf16's: what must equal the bf16 manifest. */
function asBf16(m: Manifest): Manifest {
  const bf = (d: string) => (d === "fp16" ? "bf16" : d);
  return {
    ...m,
    dtype: bf(m.dtype) as Manifest["dtype"],
    buffers: m.buffers.map((b) => ({ ...b, dtype: bf(b.dtype) as typeof b.dtype })),
    reference: { ...m.reference, tolerance: DEFAULT_TOLERANCE.bf16 },
  };
}

describe("element types", () => {
  it("offers bf16, fp16 and fp8e4m3, with fp16's tolerance tighter than bf16's", () => {
    expect(OPERATOR_DTYPES).toEqual(["bf16", "fp16", "fp8e4m3"]);
    expect(DEFAULT_TOLERANCE.fp16).toBeLessThan(DEFAULT_TOLERANCE.bf16);
  });

  it("every operator family: buffers, reference and kernel arguments agree on the dtype, and fp16 compiles as bf16 does", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...Object.keys(FAMILIES)),
        fc.constantFrom(2, 4),
        fc.constantFrom(...TWO_BYTE),
        async (family, world, dtype) => {
          const r = await FAMILIES[family]!(dtype, world);
          agreesOn(r, dtype, family);
          if (dtype === "fp16") {
            const bf16 = await FAMILIES[family]!("bf16", world);
            expect(asBf16(r.manifest), family).toEqual(bf16.manifest);
            expect(r.files.map((f) => f.path)).toEqual(bf16.files.map((f) => f.path));
            r.files.forEach((f, i) =>
              expect(f.text.replaceAll(TL_DTYPE.fp16, TL_DTYPE.bf16), `${family} ${f.path}`).toBe(bf16.files[i]!.text),
            );
            expect(r.expect ?? {}).toEqual(bf16.expect ?? {});
          }
        },
      ),
      { numRuns: 60 },
    );
  }, 120_000);

  it("the MLP chain compiles in fp16: both stages and the chain say fp16, with fp16's tolerance", async () => {
    const r = await compileMlp({ name: "mlp", world: 2, M: 256, hidden: 128, intermediate: 64, options: { dtype: "fp16" } });
    expect(r.chain.dtype).toBe("fp16");
    expect(r.chain.reference.tolerance).toBe(DEFAULT_TOLERANCE.fp16);
    for (const s of r.stages) agreesOn(s.result, "fp16", s.dir);
  });

  it("the TLX backend builds bf16 and fp16 and refuses fp32 by name; the fastest backend picks Triton for fp32", async () => {
    const op = gemm("ag-gemm", gather("fp32", 2, "A", [M, K]), "gemm_tma_persistent", "fp32", { tile: { BM: 128, BN: 128, BK: 64 } });
    const err = await compile(op, tlxBackend()).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "unsupported-op", message: expect.stringMatching(/bf16 or fp16.*not fp32.*triton backend/) });
    const { tile: _tile, ...untiled } = op;
    expect(fastestBackend().select!(untiled, "h100")).toBe(tritonBackend);
  });
});
