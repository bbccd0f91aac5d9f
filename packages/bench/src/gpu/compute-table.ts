// Turns a compute_bench.py result into the tuned table compile() reads
// (`@ovl/tlx-emitter/configs/<target>.json`): per shape, the fastest configuration that was
// correct (every element written, error under the tolerance, no wait error).
//   tsx src/gpu/compute-table.ts <results.json> <target> <source-folder> [--kind emitted|plain]
import { readFileSync, writeFileSync } from "node:fs";
import { TARGETS, type TargetName } from "@ovl/primitives";
import type { ComputeConfig } from "@ovl/sim";
import {
  COMPUTE_CONFIGS_SCHEMA,
  computeConfigPath,
  parseComputeConfigs,
  type ComputeConfigEntry,
  type ComputeConfigTable,
} from "@ovl/tlx-emitter";

/** One timed launch of a compute_bench.py result. */
export interface ResultCase {
  readonly label: string;
  readonly kind: "plain" | "emitted";
  readonly entry: string;
  readonly config: ComputeConfig;
  readonly predictedMs?: number;
  readonly modelRank?: number;
  readonly ms?: number;
  readonly p10?: number;
  readonly p90?: number;
  readonly tflops?: number;
  readonly relErr?: number;
  readonly allWritten?: boolean;
  readonly waitError?: number[];
  readonly error?: string;
  /** Which role the case plays in a bench run (`tuned`, `previous`), when it has one. */
  readonly role?: string;
}

/** One shape of a compute_bench.py result. */
export interface ResultShape {
  readonly name: string;
  readonly op: "ag-gemm" | "gemm-rs";
  readonly role: "consumer" | "producer";
  readonly mlp: string;
  readonly world: number;
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly dtype: "bf16";
  readonly flops: number;
  readonly cublas: { readonly ms: number; readonly tflops: number; readonly relErr: number; readonly runs?: unknown };
  readonly cases: readonly ResultCase[];
}

/** A compute_bench.py result file. */
export interface ComputeResults {
  readonly schema: "ovl.compute-results/v1";
  readonly mode: "sweep" | "bench";
  readonly device: string;
  readonly sms: number;
  readonly torch: string;
  readonly triton: string;
  readonly cuda: string;
  readonly method: string;
  readonly shapes: readonly ResultShape[];
  readonly skipped: readonly string[];
  /** The target whose table the bench run's `tuned` cases were emitted with (emit-compute.ts --target). */
  readonly target?: TargetName;
  readonly [k: string]: unknown;
}

/** Tolerance of the relative Frobenius error against the fp32 reference (bf16 operands). */
export const REL_TOLERANCE = 2e-2;

/** Whether a case ran and computed the right thing. */
export function correct(c: ResultCase): c is ResultCase & { ms: number } {
  return c.ms !== undefined && c.allWritten === true && (c.relErr ?? 1) < REL_TOLERANCE && c.waitError === undefined;
}

/** The fastest correct case of `s` of `kind`, if any. */
export function fastest(s: ResultShape, kind?: "plain" | "emitted"): (ResultCase & { ms: number }) | undefined {
  const ok = s.cases.filter((c): c is ResultCase & { ms: number } => (kind === undefined || c.kind === kind) && correct(c));
  return ok.sort((a, b) => a.ms - b.ms)[0];
}

/**
 * The table of `results` for `target`.
 * @throws {Error} when `target` is not a target, or the results were emitted for another target.
 */
export function tableOf(results: ComputeResults, target: TargetName, source: string, kind?: "plain" | "emitted"): ComputeConfigTable {
  if (!Object.hasOwn(TARGETS, target)) throw new Error(`target must be one of ${Object.keys(TARGETS).join(", ")}, got '${String(target)}'`);
  if (results.target !== undefined && results.target !== target)
    throw new Error(`these results were emitted for ${results.target} (emit-compute.ts --target ${results.target}), not ${target}`);
  const entries: ComputeConfigEntry[] = [];
  for (const s of results.shapes) {
    const w = fastest(s, kind);
    if (w === undefined) continue;
    const c = w.config;
    entries.push({
      op: s.op,
      M: s.M,
      N: s.N,
      K: s.K,
      dtype: s.dtype,
      body: c.body as ComputeConfigEntry["body"],
      BM: c.BM,
      BN: c.BN,
      BK: c.BK,
      groupM: c.groupM,
      numStages: c.numStages,
      numWarps: c.numWarps,
      ms: Number(w.ms.toFixed(4)),
      cublasMs: Number(s.cublas.ms.toFixed(4)),
    });
  }
  entries.sort((a, b) => a.op.localeCompare(b.op) || a.M - b.M || a.N - b.N || a.K - b.K);
  const date = source.match(/\d{4}-\d{2}-\d{2}/)?.[0] ?? new Date().toISOString().slice(0, 10);
  return parseComputeConfigs({
    $schema: COMPUTE_CONFIGS_SCHEMA,
    target,
    device: `${results.device}, torch ${results.torch}, triton ${results.triton}`,
    measured: date,
    source,
    entries,
  });
}

/**
 * `table` with its entries of `ops` replaced by `update`'s (a run that measured only those
 * operators' alternatives); the other entries, and where they came from, are kept. The device
 * must be the same; `measured` is the later date and `source` names both runs.
 * @throws {Error} for tables of different targets or devices.
 */
export function mergeTables(table: ComputeConfigTable, update: ComputeConfigTable, ops: readonly string[]): ComputeConfigTable {
  if (table.target !== update.target) throw new Error(`cannot merge a ${update.target} table into the ${table.target} table`);
  if (table.device.split(",")[0] !== update.device.split(",")[0])
    throw new Error(`the ${table.target} table was measured on ${table.device}, the update on ${update.device}`);
  const kept = table.entries.filter((e) => !ops.includes(e.op));
  const entries = [...kept, ...update.entries.filter((e) => ops.includes(e.op))];
  entries.sort((a, b) => a.op.localeCompare(b.op) || a.M - b.M || a.N - b.N || a.K - b.K);
  const older = table.source
    .split("; ")
    .filter((part) => !ops.some((op) => part.endsWith(`(${op})`)))
    .map((part) => (/\([a-z-]+\)$/.test(part) ? part : `${part} (${[...new Set(kept.map((e) => e.op))].join(", ")})`));
  return parseComputeConfigs({
    ...update,
    measured: [table.measured, update.measured].sort().at(-1),
    source: [...older, `${update.source} (${ops.join(", ")})`].join("; "),
    entries,
  });
}

/** The table as committed (biome's JSON format: two-space indent). */
export function serializeTable(t: ComputeConfigTable): string {
  return `${JSON.stringify(t, null, 2)}\n`;
}

/**
 * Write the table of `results` for `target` where compile() reads it (`configs/<target>.json`
 * of @ovl/tlx-emitter, or `dir`); returns the path and the table.
 */
export function writeTable(
  results: ComputeResults,
  target: TargetName,
  source: string,
  kind?: "plain" | "emitted",
  dir?: string,
): { path: string; table: ComputeConfigTable } {
  const table = tableOf(results, target, source, kind);
  const path = computeConfigPath(target, dir);
  writeFileSync(path, serializeTable(table));
  return { path, table };
}

function main(): void {
  const [file, target, source] = process.argv.slice(2);
  if (file === undefined || target === undefined || source === undefined) {
    console.error(
      "usage: tsx src/gpu/compute-table.ts <results.json> <target> <source-folder> [--kind emitted|plain] [--only gemm-rs,...]",
    );
    process.exit(2);
  }
  const ki = process.argv.indexOf("--kind");
  const kind = ki >= 0 ? (process.argv[ki + 1] as "plain" | "emitted") : undefined;
  const oi = process.argv.indexOf("--only");
  const results = JSON.parse(readFileSync(file, "utf8")) as ComputeResults;
  if (oi < 0) {
    const { path, table } = writeTable(results, target as TargetName, source, kind);
    console.log(`${path}: ${table.entries.length} entries from ${file}`);
    return;
  }
  // Only these operators' entries change; the rest of the committed table stays.
  const ops = (process.argv[oi + 1] ?? "").split(",").filter((o) => o !== "");
  const path = computeConfigPath(target as TargetName);
  const merged = mergeTables(
    parseComputeConfigs(JSON.parse(readFileSync(path, "utf8"))),
    tableOf(results, target as TargetName, source, kind),
    ops,
  );
  writeFileSync(path, serializeTable(merged));
  console.log(
    `${path}: ${merged.entries.filter((e) => ops.includes(e.op)).length} ${ops.join(", ")} entries from ${file}, ${merged.entries.length} in all`,
  );
}

if (process.argv[1]?.endsWith("compute-table.ts")) main();
