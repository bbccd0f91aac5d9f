// Turns a compute_bench.py result into the tuned table compile() reads
// (`@ovl/tlx-emitter/configs/<target>.json`): per shape, the fastest configuration that was
// correct (every element written, error under the tolerance, no wait error).
//   tsx scripts/compute-tables/compute-table.ts <results.json> <target> <source-folder> [--kind emitted|plain] [--only gemm-rs,...]
//   tsx scripts/compute-tables/compute-table.ts <results.json> <target> <source-folder> --tlx
// Several runs, comma-separated (`a.json,b.json`), are pooled first (`poolRuns`): each case's
// geometric mean over the runs it was timed correctly in, every run.
// --tlx (a bench run with emit-tlx-compute.ts's cases) keeps every entry's configuration and
// adds the fastest TLX backend kernel of its shape (`tlx`), with the entry's own `ms` and
// `cublasMs` re-measured in the same run, so the two backends compare within one run.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { TARGETS, type TargetName } from "@ovl/primitives";
import type { ComputeConfig } from "../../src/index.js";
import {
  COMPUTE_CONFIGS_SCHEMA,
  computeConfigPath,
  parseComputeConfigs,
  type ComputeConfigEntry,
  type ComputeConfigTable,
  type TlxConfigEntry,
  type WarpSpecialization,
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
  /** Which role the case plays in a bench run (`tuned`, `previous`, `tlx`, `tlx-emitted`), when it has one. */
  readonly role?: string;
  /** TLX cases: the consumer schedule and ring. */
  readonly warpSpecialization?: WarpSpecialization;
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

/** The geometric mean of `xs` (positive numbers: times, or ratios of them). */
export const gmean = (xs: readonly number[]): number => Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length);

/**
 * Several runs of the same cases as one result: per shape (by name), the cases of the first run
 * every run timed correctly (by label and kind, with the first run's role), each with the
 * geometric mean of its times, and cuBLAS likewise — so a table picks
 * what is fastest across runs rather than in one run's noise (on one H100 the same kernel's
 * ratio to cuBLAS moves by up to 5% between runs on different machines). One run is itself.
 * @throws {Error} for runs of different devices or targets, or none.
 */
export function poolRuns(runs: readonly ComputeResults[]): ComputeResults {
  const [first] = runs;
  if (first === undefined) throw new Error("no runs to pool");
  if (runs.length === 1) return first;
  for (const r of runs) {
    if (r.device !== first.device) throw new Error(`cannot pool runs of ${first.device} and ${r.device}`);
    if (r.target !== first.target) throw new Error(`cannot pool runs emitted for ${first.target} and ${r.target}`);
  }
  const shapes = first.shapes.flatMap((s): ResultShape[] => {
    const each = runs.map((r) => r.shapes.find((x) => x.name === s.name));
    if (each.some((x) => x === undefined)) return [];
    const timed = each as ResultShape[];
    const cases = s.cases.flatMap((c): ResultCase[] => {
      // The same kernel by label and kind (its role may differ: a run's tuned case is another's alternative).
      const same = timed.map((x) => x.cases.find((y) => y.label === c.label && y.kind === c.kind));
      if (!same.every((y): y is ResultCase & { ms: number } => y !== undefined && correct(y))) return [];
      return [{ ...c, ms: gmean(same.map((y) => y.ms)), relErr: Math.max(...same.map((y) => y.relErr ?? 0)) }];
    });
    const cublasMs = gmean(timed.map((x) => x.cublas.ms));
    return [{ ...s, cublas: { ...s.cublas, ms: cublasMs, tflops: s.flops / cublasMs / 1e9 }, cases }];
  });
  return { ...first, method: `geometric mean over ${runs.length} runs of: ${first.method}`, shapes };
}

/** The configuration of a table entry, as compute cases record it. */
export function entryConfig(e: ComputeConfigEntry): ComputeConfig {
  return { body: e.body, BM: e.BM, BN: e.BN, BK: e.BK, groupM: e.groupM, numStages: e.numStages, numWarps: e.numWarps };
}

/** The shape's `tuned` case (the table's configuration as the run emitted it), when it ran correctly. */
export function tunedCase(s: ResultShape): (ResultCase & { ms: number }) | undefined {
  return s.cases.find((c): c is ResultCase & { ms: number } => c.role === "tuned" && correct(c));
}

/** Whether case `c` ran table entry `e`'s configuration. */
export function runsEntry(c: ResultCase, e: ComputeConfigEntry): boolean {
  const own = entryConfig(e);
  return (Object.keys(own) as (keyof ComputeConfig)[]).every((k) => c.config[k] === own[k]);
}

/** Whether a case is a TLX kernel (plain or the TLX backend's), not a Triton body. */
export function isTlx(c: ResultCase): boolean {
  return c.role === "tlx" || c.role === "tlx-emitted";
}

/** The fastest correct Triton case of `s` of `kind`, if any (TLX cases are not table bodies). */
export function fastest(s: ResultShape, kind?: "plain" | "emitted"): (ResultCase & { ms: number }) | undefined {
  const ok = s.cases.filter((c): c is ResultCase & { ms: number } => (kind === undefined || c.kind === kind) && !isTlx(c) && correct(c));
  return ok.sort((a, b) => a.ms - b.ms)[0];
}

/** The fastest correct kernel of the TLX backend at `s` (role `tlx-emitted`), if any. */
export function fastestTlx(s: ResultShape): (ResultCase & { ms: number; warpSpecialization: WarpSpecialization }) | undefined {
  const ok = s.cases.filter(
    (c): c is ResultCase & { ms: number; warpSpecialization: WarpSpecialization } =>
      c.role === "tlx-emitted" && c.warpSpecialization !== undefined && correct(c),
  );
  return ok.sort((a, b) => a.ms - b.ms)[0];
}

/** How a table's `source` names the run its TLX configurations (and the entries' times) came from. */
export const TLX_SOURCE = "(tlx, with the entries' ms and cublasMs)";

/** The TLX entry of a case. */
function tlxEntry(c: ResultCase & { ms: number; warpSpecialization: WarpSpecialization }): TlxConfigEntry {
  const w = c.warpSpecialization;
  return {
    consumerSchedule: w.consumerSchedule,
    BM: c.config.BM,
    BN: c.config.BN,
    BK: c.config.BK,
    groupM: c.config.groupM,
    stages: w.stages ?? c.config.numStages,
    ...(w.epilogueSplit === 1 || w.epilogueSplit === 2 || w.epilogueSplit === 4 ? { epilogueSplit: w.epilogueSplit } : {}),
    ...(w.notifier === undefined ? {} : { notifier: w.notifier }),
    ...(w.clusterM === 2 ? { clusterM: 2 as const } : {}),
    ms: Number(c.ms.toFixed(4)),
  };
}

/**
 * `table` with each entry that `results` measured given its shape's fastest TLX backend
 * kernel (`tlx`) and its own `ms` / `cublasMs` from the same run: the `tuned` case of the
 * shape must be the entry's configuration. Entries the run did not measure are kept as
 * they are (without a `tlx` added).
 * @throws {Error} for another device or target, or a tuned case that is not the entry's configuration.
 */
export function withTlx(table: ComputeConfigTable, results: ComputeResults, source: string): ComputeConfigTable {
  if (results.target !== undefined && results.target !== table.target)
    throw new Error(`these results were emitted for ${results.target}, not the ${table.target} table`);
  if (!table.device.startsWith(results.device))
    throw new Error(`the ${table.target} table was measured on ${table.device}, these results on ${results.device}`);
  let covered = 0;
  const coveredOps = new Set<string>();
  const entries = table.entries.map((e) => {
    const s = results.shapes.find((x) => x.op === e.op && x.M === e.M && x.N === e.N && x.K === e.K && x.dtype === e.dtype);
    if (s === undefined) return e;
    const tuned = tunedCase(s);
    const t = fastestTlx(s);
    if (tuned === undefined || t === undefined) return e;
    if (!runsEntry(tuned, e))
      throw new Error(`${s.name}: the run's tuned kernel (${tuned.label}) is not the table's entry; emit the bench from this table`);
    covered += 1;
    coveredOps.add(e.op);
    return { ...e, ms: Number(tuned.ms.toFixed(4)), cublasMs: Number(s.cublas.ms.toFixed(4)), tlx: tlxEntry(t) };
  });
  const date = source.match(/\d{4}-\d{2}-\d{2}/)?.[0] ?? table.measured;
  if (covered === 0) throw new Error("the results hold no shape of the table with a correct tuned case and TLX backend kernel");
  return parseComputeConfigs({
    ...table,
    measured: [table.measured, date].sort().at(-1),
    source: tlxSources(table, coveredOps, source),
    entries,
  });
}

/** A TLX part of a table's `source`: the run, then the operators whose `tlx` entries it measured (all when none are named). */
const TLX_PART = /^(.*) \(tlx(?: of ([a-z, -]+))?, with the entries' ms and cublasMs\)$/;

/**
 * A table's `source` once the run at `source` measured the `tlx` entries of the operators
 * `covered`: earlier TLX parts keep the operators the run did not measure (and go when none
 * is left), the run's part names the ones it did where the table holds others.
 */
export function tlxSources(table: ComputeConfigTable, covered: ReadonlySet<string>, source: string): string {
  // The operators a TLX backend realises (ag-moe has none).
  const ops = [...new Set(table.entries.filter((e) => e.op !== "ag-moe").map((e) => e.op))];
  const named = (list: readonly string[]) =>
    list.length === ops.length ? TLX_SOURCE : `(tlx of ${list.join(", ")}, with the entries' ms and cublasMs)`;
  const parts = table.source.split("; ").flatMap((p) => {
    const m = TLX_PART.exec(p);
    if (m === null) return [p];
    const left = (m[2] === undefined ? ops : m[2].split(", ")).filter((op) => !covered.has(op));
    return left.length === 0 ? [] : [`${m[1]} ${named(left)}`];
  });
  return [...parts, `${source} ${named(ops.filter((op) => covered.has(op)))}`].join("; ");
}

/**
 * The table of `results` for `target`: per shape, the fastest correct Triton case (of `kind`)
 * and, where the run timed the TLX backend's kernels, the fastest of those as the entry's `tlx`.
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
    // A run with the TLX backend's kernels: the shape's fastest, timed beside the entry's own.
    const t = fastestTlx(s);
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
      ...(t === undefined ? {} : { tlx: tlxEntry(t) }),
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
    .map((part) =>
      /\([a-z-]+\)$/.test(part) || TLX_PART.test(part) ? part : `${part} (${[...new Set(kept.map((e) => e.op))].join(", ")})`,
    );
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
 * `fresh` with the entries of `existing` whose operators `fresh` has none of (ag-moe's, which
 * `gpu/moe_table.py` writes from another benchmark), and the parts of `existing.source` naming them.
 */
export function keepOtherOperators(fresh: ComputeConfigTable, existing: ComputeConfigTable | undefined): ComputeConfigTable {
  const measured = new Set(fresh.entries.map((e) => e.op));
  const kept = existing?.entries.filter((e) => !measured.has(e.op)) ?? [];
  if (existing === undefined || kept.length === 0) return fresh;
  const ops = [...new Set(kept.map((e) => e.op))];
  const sources = existing.source.split("; ").filter((part) => ops.some((op) => part.endsWith(`(${op})`)));
  return parseComputeConfigs({ ...fresh, source: [fresh.source, ...sources].join("; "), entries: [...fresh.entries, ...kept] });
}

/**
 * Write the table of `results` for `target` where compile() reads it (`configs/<target>.json`
 * of @ovl/tlx-emitter, or `dir`), keeping the committed entries of operators the results do not
 * measure (`keepOtherOperators`); returns the path and the table.
 */
export function writeTable(
  results: ComputeResults,
  target: TargetName,
  source: string,
  kind?: "plain" | "emitted",
  dir?: string,
): { path: string; table: ComputeConfigTable } {
  const path = computeConfigPath(target, dir);
  const existing = existsSync(path) ? parseComputeConfigs(JSON.parse(readFileSync(path, "utf8")), path) : undefined;
  const table = keepOtherOperators(tableOf(results, target, source, kind), existing);
  writeFileSync(path, serializeTable(table));
  return { path, table };
}

function main(): void {
  const [files, target, source] = process.argv.slice(2);
  if (files === undefined || target === undefined || source === undefined) {
    console.error(
      "usage: tsx scripts/compute-tables/compute-table.ts <results.json[,more.json...]> <target> <source> [--kind emitted|plain] [--only gemm-rs,...] [--tlx]",
    );
    process.exit(2);
  }
  const ki = process.argv.indexOf("--kind");
  const kind = ki >= 0 ? (process.argv[ki + 1] as "plain" | "emitted") : undefined;
  const oi = process.argv.indexOf("--only");
  // Several runs (comma-separated) are pooled: each case's geometric mean over the runs.
  const results = poolRuns(files.split(",").map((f) => JSON.parse(readFileSync(f, "utf8")) as ComputeResults));
  if (process.argv.includes("--tlx")) {
    const path = computeConfigPath(target as TargetName);
    const table = withTlx(parseComputeConfigs(JSON.parse(readFileSync(path, "utf8"))), results, source);
    writeFileSync(path, serializeTable(table));
    console.log(
      `${path}: ${table.entries.filter((e) => e.tlx !== undefined).length} of ${table.entries.length} entries with a TLX configuration`,
    );
    return;
  }
  if (oi < 0) {
    const { path, table } = writeTable(results, target as TargetName, source, kind);
    console.log(`${path}: ${table.entries.length} entries from ${files}`);
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
    `${path}: ${merged.entries.filter((e) => ops.includes(e.op)).length} ${ops.join(", ")} entries from ${files}, ${merged.entries.length} in all`,
  );
}

if (process.argv[1]?.endsWith("compute-table.ts")) main();
