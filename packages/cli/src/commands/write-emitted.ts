// Writing what compile() emitted into an output folder: every kernel file, `manifest.json`
// and, when given, the plan the operator was compiled from. One place for every `ovl emit`.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { serializePlan, type ChunkPlan } from "@ovl/chunk-plan";
import { emitManifestJson, type EmitResult } from "@ovl/tlx-emitter";

/** Where {@link writeEmitted} wrote: the folder, the manifest and every file (manifest and plan included). */
export interface WrittenOperator {
  readonly dir: string;
  readonly manifest: string;
  readonly files: string[];
}

/** Writes `result`'s files, its manifest and (given) `plan` as `plan.json` into `outDir`, created if missing. */
export function writeEmitted(outDir: string, result: EmitResult, plan?: ChunkPlan): WrittenOperator {
  const dir = resolve(outDir);
  mkdirSync(dir, { recursive: true });
  const files = result.files.map((x) => {
    writeFileSync(join(dir, x.path), x.text);
    return join(dir, x.path);
  });
  const manifest = join(dir, "manifest.json");
  writeFileSync(manifest, emitManifestJson(result.manifest));
  files.push(manifest);
  if (plan !== undefined) {
    writeFileSync(join(dir, "plan.json"), serializePlan(plan));
    files.push(join(dir, "plan.json"));
  }
  return { dir, manifest, files };
}
