// The benchmark harness: runs a function repeatedly, reports median and spread, and writes
// results (JSON + markdown) into a run folder of the repository's evidence tree
// (results/runs/). Speed is measured here, never asserted in unit tests.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** One measured case: per-iteration times in milliseconds and derived statistics. */
export interface Measurement {
  name: string;
  /** Work items per iteration (operations, expressions, ops validated...), for throughput. */
  itemsPerIteration: number;
  iterations: number;
  medianMs: number;
  p10Ms: number;
  p90Ms: number;
  /** Items per second at the median. */
  itemsPerSecond: number;
  extra?: Record<string, number | string>;
}

/** Options of {@link measure}. */
export interface MeasureOptions {
  /** Untimed calls first, so the JIT settles. Default 3. */
  warmup?: number;
  /** At least this many timed calls (default 5; 1 for cases of tens of seconds). */
  minIterations?: number;
  /** Stop after this many timed calls... */
  maxIterations?: number;
  /** ...or once this much time was spent timing (ms), whichever comes first. Default 2000. */
  budgetMs?: number;
  itemsPerIteration?: number;
  extra?: Record<string, number | string>;
}

function quantile(sorted: number[], q: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.round(q * (sorted.length - 1))));
  return sorted[i] ?? Number.NaN;
}

/** Times `fn` (at least `minIterations`, default 5, timed calls) and returns the statistics. */
export function measure(name: string, fn: () => unknown, opts: MeasureOptions = {}): Measurement {
  const warmup = opts.warmup ?? 3;
  for (let i = 0; i < warmup; i++) fn();
  const times: number[] = [];
  const start = performance.now();
  while (more(times, start, opts)) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  return summarise(name, times, opts);
}

/** {@link measure} for an asynchronous `fn`: each call is awaited before the next starts. */
export async function measureAsync(name: string, fn: () => Promise<unknown>, opts: MeasureOptions = {}): Promise<Measurement> {
  const warmup = opts.warmup ?? 3;
  for (let i = 0; i < warmup; i++) await fn();
  const times: number[] = [];
  const start = performance.now();
  while (more(times, start, opts)) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  return summarise(name, times, opts);
}

function more(times: readonly number[], start: number, opts: MeasureOptions): boolean {
  const minIterations = Math.max(1, opts.minIterations ?? 5);
  const maxIterations = Math.max(minIterations, opts.maxIterations ?? 200);
  const budgetMs = opts.budgetMs ?? 2000;
  return times.length < minIterations || (times.length < maxIterations && performance.now() - start < budgetMs);
}

function summarise(name: string, times: number[], opts: MeasureOptions): Measurement {
  times.sort((a, b) => a - b);
  const medianMs = quantile(times, 0.5);
  const items = opts.itemsPerIteration ?? 1;
  return {
    name,
    itemsPerIteration: items,
    iterations: times.length,
    medianMs,
    p10Ms: quantile(times, 0.1),
    p90Ms: quantile(times, 0.9),
    itemsPerSecond: medianMs > 0 ? (items * 1000) / medianMs : Number.POSITIVE_INFINITY,
    ...(opts.extra ? { extra: opts.extra } : {}),
  };
}

/** A suite's results as written to disk. */
export interface SuiteResult {
  suite: string;
  description: string;
  measurements: Measurement[];
}

/** The evidence tree the runs are written to (results/runs at the repository root). */
export const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "results", "runs");

/** A time or rate as the markdown tables print it. */
export function fmt(n: number): string {
  return n >= 100 ? n.toFixed(0) : n >= 1 ? n.toFixed(2) : n.toPrecision(3);
}

/** Renders a suite as a markdown table. */
export function toMarkdown(result: SuiteResult, machine: string): string {
  const lines = [
    `# ${result.suite}`,
    "",
    result.description,
    "",
    `Machine: ${machine}. Node ${process.version}.`,
    "",
    "| case | median ms | p10 ms | p90 ms | items/iter | items/s | runs |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const m of result.measurements) {
    lines.push(
      `| ${m.name} | ${fmt(m.medianMs)} | ${fmt(m.p10Ms)} | ${fmt(m.p90Ms)} | ${m.itemsPerIteration} | ${fmt(m.itemsPerSecond)} | ${m.iterations} |`,
    );
  }
  return `${lines.join("\n")}\n`;
}

/** Describes this machine for the results header. */
export function machineDescription(): string {
  const c = cpus();
  return `${c.length} × ${c[0]?.model ?? "unknown CPU"}`;
}

/** Writes `<dir>/<suite>.json` and `<dir>/<suite>.md`; returns the markdown. */
export function writeSuite(result: SuiteResult, dir: string = RESULTS_DIR): string {
  mkdirSync(dir, { recursive: true });
  const machine = machineDescription();
  const stamped = { ...result, machine, node: process.version, date: new Date().toISOString() };
  writeFileSync(join(dir, `${result.suite}.json`), `${JSON.stringify(stamped, null, 2)}\n`);
  const md = toMarkdown(result, machine);
  writeFileSync(join(dir, `${result.suite}.md`), md);
  return md;
}
