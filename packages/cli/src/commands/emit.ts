// `ovl emit`: plan, lower and emit a fused operator (AG+GEMM or GEMM+RS) as Triton kernels
// plus the `ovl.manifest/v1` the runner executes, with the plan and schedule beside them.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { serializePlan, type ChunkPlan, type TileSchedule } from "@ovl/chunk-plan";
import { emitAgGemm, emitGemmRs, emitManifestJson, emitTlxAgGemm, type EmitResult } from "@ovl/tlx-emitter";
import { buildPlan, buildSchedule } from "../build.js";
import { UsageError } from "../errors.js";
import type { CommandOutput } from "../io.js";
import { describeProblem, type Problem } from "../problem.js";

/** What `emitProblem` wrote. */
export interface EmittedOperator {
  readonly name: string;
  readonly dir: string;
  readonly manifestPath: string;
  readonly files: readonly string[];
  readonly plan: ChunkPlan;
  readonly schedule: TileSchedule;
  readonly result: EmitResult;
}

/** The manifest name of a problem, e.g. `ag_gemm_mlp1_w8_s2`. */
export function operatorName(p: Problem): string {
  const shape = p.shapeName !== undefined ? p.shapeName.replace("-", "").toLowerCase() : `m${p.M}n${p.N}k${p.K}`;
  const backend = p.operator === "gemm-rs" ? (p.backend === "sm" ? "_sm" : "_ce") : "";
  return `${p.operator.replace("-", "_")}_${shape}_w${p.world}${backend}_s${p.split}`;
}

/** Plan, lower and emit `p` into `outDir`: kernels, manifest.json, plan.json, schedule.json. */
export function emitProblem(p: Problem, outDir: string, extra: { timing?: { warmup: number; reps: number; checkRuns: number } } = {}): EmittedOperator {
  if (p.operator !== "ag-gemm" && p.operator !== "gemm-rs") {
    throw new UsageError("unsupported", `ovl emit writes fused kernels for ag-gemm or gemm-rs, not ${p.operator}; try: ovl emit ag-gemm --shape MLP-1 --world 4`);
  }
  if (p.operator === "ag-gemm" && p.backend === "sm") {
    throw new UsageError("unsupported", "AG+GEMM is emitted with copy-engine transfers only; drop --backend sm (GEMM+RS takes --backend sm)");
  }
  if (p.template === "direct" && p.operator === "ag-gemm") {
    throw new UsageError("unsupported", "the direct template is one NCCL collective, with nothing to fuse; use --template swizzle or ring");
  }
  const plan = buildPlan(p);
  const schedule = buildSchedule(p, plan);
  const name = operatorName(p);
  const options = { name, backend: p.backend, ...(extra.timing ? { timing: extra.timing } : {}) };
  const result = p.operator === "ag-gemm" ? emitAgGemm(plan, schedule, options) : emitGemmRs(plan, schedule, options);
  const dir = resolve(outDir);
  mkdirSync(dir, { recursive: true });
  const files: string[] = [];
  for (const f of result.files) {
    writeFileSync(join(dir, f.path), f.text);
    files.push(join(dir, f.path));
  }
  const manifestPath = join(dir, "manifest.json");
  writeFileSync(manifestPath, emitManifestJson(result.manifest));
  writeFileSync(join(dir, "plan.json"), serializePlan(plan));
  writeFileSync(join(dir, "schedule.json"), JSON.stringify(schedule) + "\n");
  files.push(manifestPath, join(dir, "plan.json"), join(dir, "schedule.json"));
  return { name, dir, manifestPath, files, plan, schedule, result };
}

/**
 * Also emit the TLX warp-specialised AG+GEMM (copy-engine transport) into `<dir>/tlx`: its
 * manifest names a precompiled cubin, built ahead of time where the TLX compiler is installed.
 */
export function emitTlx(e: EmittedOperator): string[] {
  const tlx = emitTlxAgGemm(e.plan, e.schedule, { name: `${e.name}_tlx` });
  const dir = join(e.dir, "tlx");
  mkdirSync(dir, { recursive: true });
  const files = tlx.files.map((f) => {
    writeFileSync(join(dir, f.path), f.text);
    return join(dir, f.path);
  });
  writeFileSync(join(dir, "manifest.json"), emitManifestJson(tlx.manifest));
  return [...files, join(dir, "manifest.json")];
}

/** Run `ovl emit`; with `tlx`, also the TLX kernel (AG+GEMM only). */
export function emitCommand(p: Problem, outDir: string, tlx = false): CommandOutput {
  if (tlx && p.operator !== "ag-gemm") throw new UsageError("unsupported", "--tlx emits the warp-specialised AG+GEMM; drop --tlx for gemm-rs");
  const e = emitProblem(p, outDir);
  const tlxFiles = tlx ? emitTlx(e) : [];
  const kernels = e.result.manifest.kernels.map((k) => ({ name: k.name, entry: k.entry, stream: k.stream, template: k.template.kind }));
  return {
    json: { name: e.name, dir: e.dir, manifest: e.manifestPath, files: [...e.files, ...tlxFiles], kernels, world: p.world },
    lines: [
      `${e.name}: ${describeProblem(p)}`,
      ...kernels.map((k) => `  kernel ${k.name} (${k.template}) on the ${k.stream} stream`),
      ...[...e.files, ...tlxFiles].map((f) => `wrote ${f}`),
      `run it: ovl run ${e.manifestPath} --emulate    (or on GPUs: ovl run ${e.manifestPath} --gpus ${p.world})`,
    ],
  };
}
