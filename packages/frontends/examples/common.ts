// What both examples share: compile an AllGather+GEMM operator from a frontend's plan with
// ovl's built-in TMA GEMM body, print what happened, and write the kernel and manifest.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { dumpPlan, planSignals, validatePlan, type ChunkPlan } from "@ovl/chunk-plan";
import { builtinBody, compile, emitManifestJson, type EmitResult } from "@ovl/tlx-emitter";

/** The GEMM `C[M, N] = AllGather(A)[M, K] @ B[K, N]` each example compiles (small: it is emulated on the CPU). */
export interface Shape {
  readonly world: number;
  readonly M: number;
  readonly N: number;
  readonly K: number;
}

/**
 * Validates `plan`, prints it, compiles it as AllGather+GEMM with the built-in
 * `gemm_tma_persistent` body and writes the kernel sources and `manifest.json` into `out`.
 */
export async function compileAndWrite(name: string, plan: ChunkPlan, shape: Shape, out: string): Promise<EmitResult> {
  const report = validatePlan(plan);
  if (!report.ok) throw new Error(`plan ${plan.name} does not validate: ${report.errors.map((e) => e.message).join("; ")}`);
  console.log(dumpPlan(plan));
  const r = await compile({
    name,
    kind: "ag-gemm",
    plan: planSignals(plan),
    body: builtinBody("gemm_tma_persistent"),
    problem: { M: shape.M, N: shape.N, K: shape.K },
    tile: { BM: 32, BN: 32, BK: 32 },
    groupM: 2,
  });
  mkdirSync(out, { recursive: true });
  for (const f of r.files) writeFileSync(join(out, f.path), f.text);
  writeFileSync(join(out, "manifest.json"), emitManifestJson(r.manifest));
  const ops = r.manifest.hostOps.flatMap((h) => h.streams.flatMap((s) => s.ops));
  const remote = ops.filter((o) => o.kind === "wait" && o.rank !== undefined).length;
  console.log(
    `\ncompiled ${name}: world ${r.manifest.world}, ${ops.filter((o) => o.kind === "copy").length} copies, ${ops.length - ops.filter((o) => o.kind === "copy").length} host waits (${remote} on a peer's slot), kernel ${r.files.map((f) => f.path).join(", ")}`,
  );
  console.log(`wrote ${join(out, "manifest.json")}; emulate it with: python -m ovl_runtime run --emulate ${join(out, "manifest.json")}`);
  return r;
}
