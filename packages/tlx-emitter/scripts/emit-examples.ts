// Emits the example manifests into a directory, one folder per manifest, at a small shape
// and at the H200 GEMM configuration (128×256×64 tiles, 4 ranks), plus a `sm_templates`
// folder whose kernels.json lists the SM communication kernels no example manifest uses
// (same kernel entries as a manifest), for the AOT compile check and for the runner.
//   tsx scripts/emit-examples.ts <out-dir>
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { compiledExamples } from "../src/examples/compiled.js";
import { examples } from "../src/examples/templates.js";
import { emitManifestJson } from "../src/index.js";
import { RING_REDUCE, ringReduceSource, SM_PULL, smPullSource } from "../src/backends/triton/kernels/index.js";

const out = process.argv[2];
if (out === undefined) {
  console.error("usage: tsx scripts/emit-examples.ts <out-dir>");
  process.exit(2);
}
const h200 = { world: 4, M: 2048, N: 1024, K: 512, split: 2, tile: { BM: 128, BN: 256, BK: 64 } };
const sets = {
  small: { ...examples(), ...(await compiledExamples()) },
  h200: { ...examples(h200), ...(await compiledExamples(h200)) },
};
for (const [shape, results] of Object.entries(sets)) {
  for (const [name, result] of Object.entries(results)) {
    const dir = join(out, `${shape}_${name}`);
    mkdirSync(dir, { recursive: true });
    for (const f of result.files) writeFileSync(join(dir, f.path), f.text);
    writeFileSync(join(dir, "manifest.json"), emitManifestJson(result.manifest));
    console.log(`${dir}: ${result.files.map((f) => f.path).join(", ")}`);
  }
}

const dir = join(out, "sm_templates");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "sm_pull.py"), smPullSource({ BLOCK: 2048 }));
writeFileSync(join(dir, "ring_reduce.py"), ringReduceSource({ BLOCK: 2048 }));
const common = {
  sig_ptr: { kind: "buffer", name: "signals" },
  sig_ptrs: { kind: "peer-pointers", buffer: "signals" },
  seg_ptr: { kind: "table", name: "segments" },
  num_segments: { kind: "int", value: 4 },
  err_ptr: { kind: "error-buffer" },
  rank: { kind: "rank" },
  epoch_ptr: { kind: "epoch-word" },
  timeout_ns: { kind: "timeout-ns" },
};
const kernel = (info: typeof SM_PULL, args: Record<string, unknown>) => ({
  name: info.entry,
  source: `${info.entry}.py`,
  entry: info.entry,
  stream: "comm",
  grid: [4],
  numWarps: 4,
  numStages: 1,
  args: info.args.map((name) => ({ name, value: args[name] ?? common[name as keyof typeof common] })),
  constexprs: { BLOCK: 2048 },
  template: { kind: info.kind, params: { BLOCK: 2048 } },
});
const kernels = {
  buffers: [
    { name: "data", shape: [4096], dtype: "bf16", symmetric: true, init: "zeros" },
    { name: "signals", shape: [8], dtype: "int32", symmetric: true, init: "zeros" },
  ],
  tables: [{ name: "segments", dtype: "int64", values: [[0]] }],
  kernels: [
    kernel(SM_PULL, { src_ptrs: { kind: "peer-pointers", buffer: "data" }, dst_ptr: { kind: "buffer", name: "data" } }),
    kernel(RING_REDUCE, {
      recv_ptr: { kind: "buffer", name: "data" },
      acc_ptr: { kind: "buffer", name: "data" },
      recv_ptrs: { kind: "peer-pointers", buffer: "data" },
    }),
  ],
};
writeFileSync(join(dir, "kernels.json"), `${JSON.stringify(kernels, null, 2)}\n`);
console.log(`${dir}: sm_pull.py, ring_reduce.py`);
