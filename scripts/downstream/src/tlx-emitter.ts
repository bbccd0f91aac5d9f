// @ovl/tlx-emitter README: the template emitter (emitAgGemm + emitManifestJson), compile() of an
// operator with a built-in body (the local-kernel path: tree-sitter parses the body shipped in
// the package's kernels/), the sequence-parallel attention example, the MLP chain, and the
// typed refusal.
import { allGatherRing, allGatherSwizzle, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import {
  attentionGemmView,
  builtinBody,
  compile,
  compileMlp,
  EmitError,
  type EmitResult,
  emitAgGemm,
  emitManifestJson,
  Manifest,
  type Operator,
  tritonBackend,
} from "@ovl/tlx-emitter";
import { holds, same } from "./check.js";

// The template path, as the README's first example.
const plan = planSignals(
  allGatherSwizzle({ tensor: { name: "A", shape: [8192, 4096], dtype: "bf16" }, axis: 0, mesh: [4], split: 2, side: "push" }),
);
const schedule = lowerToTileSchedule(
  plan,
  { tensor: "A", problem: { M: 8192, N: 2752, K: 4096 }, tile: { BM: 128, BN: 256, BK: 64 }, persistent: { numSms: 132 }, groupSizeM: 8 },
  { role: "consumer" },
);
const { files, manifest } = emitAgGemm(plan, schedule);
holds(files.length > 0 && files.every((f) => f.text.includes("@triton.jit")), "emitAgGemm writes Triton kernels");
const json = emitManifestJson(manifest);
same(Manifest.parse(JSON.parse(json)).world, 4, "the manifest JSON parses back with the published schema");

// compile(): a small AllGather+GEMM from the built-in TMA GEMM body on the Triton backend.
const small = planSignals(
  allGatherSwizzle({ tensor: { name: "A", shape: [256, 64], dtype: "bf16" }, axis: 0, mesh: [4], split: 1, side: "push" }),
);
const op: Operator = {
  name: "agg",
  kind: "ag-gemm",
  plan: small,
  body: builtinBody("gemm_tma_persistent"),
  problem: { M: 256, N: 32, K: 64 },
  tile: { BM: 32, BN: 32, BK: 32 },
  groupM: 2,
};
const compiled: EmitResult = await compile(op, tritonBackend);
same(compiled.manifest.world, 4, "compile() keeps the plan's world");
holds(
  compiled.files.some((f) => f.text.includes("from ovl_runtime.language import")),
  "the transformed body imports the device primitives",
);

// Sequence-parallel attention, as the README's ag-attention example.
const attention = { S: 16384, heads: 32, kvHeads: 8, headDim: 128, causal: true };
const attn = await compile({
  name: "attn",
  kind: "ag-attention",
  plan: planSignals(
    allGatherRing({ tensor: { name: "kv", shape: [16384, 2 * 8 * 128], dtype: "bf16" }, axis: 0, mesh: [8], split: 2, side: "push" }),
  ),
  body: builtinBody("flash_attention"),
  problem: attentionGemmView(attention),
  attention,
  tile: { BM: 128, BN: 64, BK: 128 },
});
same(attn.manifest.reference.operator, "ag-attention", "an attention manifest");

// The MLP chain: AG+GEMM+SiLU-mul, then GEMM+RS.
const { chain, stages } = await compileMlp({ name: "mlp", world: 8, M: 8192, hidden: 4096, intermediate: 1376 });
same(
  stages.map((s) => s.result.manifest.reference.operator),
  ["ag-gemm-silu", "gemm-rs"],
  "the MLP's two stages",
);
holds(chain.links.length > 0, "the chain links the stages");

// A refusal is a typed EmitError naming what to use instead.
try {
  await compile({ ...op, kind: "gemm-rs" });
  throw new Error("a gemm-rs of an AllGather plan compiled");
} catch (e) {
  holds(e instanceof EmitError, `an EmitError, got ${String(e)}`);
  holds(e.code.length > 0, "with a code");
}
console.log("@ovl/tlx-emitter: README example ok");
