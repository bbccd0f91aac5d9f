// Emits the TLX example manifests into a directory, one folder per manifest, at a small
// shape and at the MLP-1 AllGather+GEMM shape on 2 ranks (plus the 8192³ plain GEMM), and
// the sm_100a GEMMs (persistent and cluster launch control) at the small shape and 8192³,
// with an `expect.json` per folder: the PTX patterns the AOT check requires of each kernel.
//   tsx scripts/tlx-emit-examples.ts <out-dir>
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { emitManifestJson } from "../src/index.js";
import { emitTlxGemm, tlxBlackwellExamples, tlxExamples, type TlxEmitResult } from "../src/index.js";

const out = process.argv[2];
if (out === undefined) {
  console.error("usage: tsx scripts/tlx-emit-examples.ts <out-dir>");
  process.exit(2);
}
const sets: Record<string, Record<string, TlxEmitResult>> = {
  small: tlxExamples(),
  // MLP-1 (TileLink Table 4) AG+GEMM on 2 ranks: A [8192, 4096] gathered, B [4096, 11008 / 2].
  mlp1: tlxExamples({ world: 2, M: 8192, N: 5504, K: 4096, split: 2 }),
  bench: { tlx_gemm_8192: emitTlxGemm({ M: 8192, N: 8192, K: 8192 }, { BM: 128, BN: 256, BK: 64 }, { name: "tlx_gemm_8192" }) },
  // sm_100a (tcgen05 / TMEM, and cluster launch control): compiled, not run.
  sm100: tlxBlackwellExamples(),
  sm100bench: tlxBlackwellExamples({ M: 8192, N: 8192, K: 8192 }),
};
for (const [shape, results] of Object.entries(sets)) {
  for (const [name, result] of Object.entries(results)) {
    if (shape === "mlp1" && name === "tlx_gemm") continue;
    const dir = join(out, `${shape}_${name}`);
    mkdirSync(dir, { recursive: true });
    for (const f of result.files) writeFileSync(join(dir, f.path), f.text);
    writeFileSync(join(dir, "manifest.json"), emitManifestJson(result.manifest));
    writeFileSync(join(dir, "expect.json"), `${JSON.stringify(result.expect, null, 2)}\n`);
    console.log(`${dir}: ${result.files.map((f) => f.path).join(", ")}`);
  }
}
