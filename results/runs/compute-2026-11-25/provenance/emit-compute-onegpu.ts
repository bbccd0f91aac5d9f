// Operators compiled with their tuned compute configuration (no tile given: the flattened
// consumer body, the TMA-store producer body) as manifests the runner's one-GPU mode runs
// with real copies and signals, so waits and notifies of the new body variants are checked
// under overlap, not only with every signal already set:
//   tsx src/gpu/emit-compute-onegpu.ts <out-dir> [--shapes MLP-1] [--worlds 2,4]
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { allGatherSwizzle, planSignals, reduceScatterDirect } from "@ovl/chunk-plan";
import { MLP_SHAPES, type MlpShapeName } from "@ovl/sim";
import { builtinBody, compile, emitManifestJson, resolveCompute, type OperatorInput } from "@ovl/tlx-emitter";

function flag(name: string, fallback: string): string[] {
  const i = process.argv.indexOf(name);
  return (i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback).split(",").filter(Boolean);
}

const out = process.argv[2];
if (out === undefined || out.startsWith("--")) {
  console.error("usage: tsx src/gpu/emit-compute-onegpu.ts <out-dir> [--shapes MLP-1] [--worlds 2,4]");
  process.exit(2);
}
const timing = { warmup: 1, reps: 3, checkRuns: 3 };
for (const name of flag("--shapes", "MLP-1") as MlpShapeName[]) {
  const { S, H, I } = MLP_SHAPES[name];
  for (const world of flag("--worlds", "2,4").map(Number)) {
    const tag = `${name.replace("-", "").toLowerCase()}_w${world}`;
    const A = { name: "A", shape: [S, H], dtype: "bf16" as const };
    const C = { name: "C", shape: [S, H], dtype: "bf16" as const };
    const ops: OperatorInput[] = [
      {
        name: `tuned_ag_${tag}`,
        kind: "ag-gemm",
        plan: planSignals(allGatherSwizzle({ tensor: A, axis: 0, mesh: [world], split: 2, side: "push" })),
        body: builtinBody("gemm_tma_persistent"),
        problem: { M: S, N: I / world, K: H },
        options: { timing },
      },
      {
        name: `tuned_rs_${tag}`,
        kind: "gemm-rs",
        plan: planSignals(reduceScatterDirect({ tensor: C, src: "C_partial", axis: 0, mesh: [world], split: 2, afterCompute: true })),
        body: builtinBody("gemm_producer"),
        problem: { M: S, N: H, K: I / world },
        options: { timing },
      },
    ];
    for (const op of ops) {
      const { op: tuned, choice } = resolveCompute(op);
      const r = await compile(op);
      const dir = join(out, op.name);
      mkdirSync(dir, { recursive: true });
      for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
      writeFileSync(join(dir, "manifest.json"), emitManifestJson(r.manifest));
      const t = tuned.tile;
      console.log(
        `${dir}: ${tuned.body.path} ${t.BM}x${t.BN}x${t.BK} (${choice.source}${choice.source === "table" ? `, ${choice.match}` : ""})`,
      );
    }
  }
}
