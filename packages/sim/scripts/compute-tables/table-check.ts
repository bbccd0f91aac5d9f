// How a target's tuned table fares in a bench run it was not made from (another machine of the
// same GPU, say): per shape, cuBLAS ÷ the faster of the two kernels the table picks — the entry's
// tuned Triton kernel and its `tlx` entry's TLX backend kernel — as `fastestBackend()` would.
//   tsx scripts/compute-tables/table-check.ts <target> <run.json>[,<run.json>...] [--sim H100_SXM|H200_SXM] [--against <table.json>]
// Each run is reported on its own (geometric mean, minimum, shapes below 0.95, the lowest four),
// and several runs also pooled (per shape the geometric mean over the runs, `poolChecks`);
// with --sim also the simulator's compute time (the tuned Triton kernel's calibration) against
// the faster kernel's measured time, per shape; with --against also another table of the target
// (an earlier one, `git show <rev>:packages/tlx-emitter/configs/<target>.json`) on the same run,
// over the shapes where the run measured both tables' kernels (`compareTables`).
import { readFileSync } from "node:fs";
import type { TargetName } from "@ovl/primitives";
import { type ComputeConfigTable, computeConfigs, parseComputeConfigs } from "@ovl/tlx-emitter";
import { simulatedMs } from "./compute-report.js";
import {
  type ComputeResults,
  correct,
  entryConfig,
  gmean,
  type ResultCase,
  type ResultShape,
  runsEntry,
  tunedCase,
} from "./compute-table.js";

/** One shape of a run, as the table's kernels did there. */
export interface TableShapeCheck {
  readonly name: string;
  /** cuBLAS ÷ the faster of the table's two kernels. */
  readonly ratio: number;
  /** Which of them was faster in this run. */
  readonly backend: "triton" | "tlx";
  /** Its time (ms). */
  readonly ms: number;
  /** With a hardware model: the simulator's compute time ÷ `ms` − 1. */
  readonly simError?: number;
  /** The entry names a TLX kernel the run did not measure (or not correctly): `ratio` is the Triton kernel's alone. */
  readonly tlxMissing: boolean;
}

/** The figures of one run. */
export interface TableCheck {
  readonly shapes: readonly TableShapeCheck[];
  readonly geomean: number;
  readonly min: number;
  readonly below95: number;
}

/** The table's entry of a shape (same operator, problem and dtype), if it has one. */
export function entryOf(
  table: ComputeConfigTable,
  s: Pick<ResultShape, "op" | "M" | "N" | "K" | "dtype">,
): ComputeConfigTable["entries"][number] | undefined {
  return table.entries.find((x) => x.op === s.op && x.M === s.M && x.N === s.N && x.K === s.K && x.dtype === s.dtype);
}

/** Whether `c` (a bench case or its result) is the TLX backend kernel of the table entry's `tlx` configuration. */
export function isEntryTlx(
  c: Pick<ResultCase, "role" | "config" | "warpSpecialization">,
  t: NonNullable<ComputeConfigTable["entries"][number]["tlx"]>,
): boolean {
  const w = c.warpSpecialization;
  return (
    c.role === "tlx-emitted" &&
    w !== undefined &&
    c.config.BM === t.BM &&
    c.config.BN === t.BN &&
    c.config.BK === t.BK &&
    c.config.groupM === t.groupM &&
    w.consumerSchedule === t.consumerSchedule &&
    w.stages === t.stages &&
    w.epilogueSplit === t.epilogueSplit &&
    w.notifier === t.notifier &&
    (w.clusterM ?? 1) === (t.clusterM ?? 1)
  );
}

/**
 * The table's kernels in `results`: for every shape of the run with a table entry, cuBLAS ÷
 * the faster of the entry's tuned Triton kernel (the run's `tuned` case, which must be the
 * entry's configuration) and the TLX backend kernel of its `tlx` entry, each only when correct;
 * with `hardware` (a simulator model name) also the simulator's error on that kernel's time.
 * @throws {Error} when the run's tuned kernel is not the entry's, or a shape has neither kernel correct.
 */
export function checkTable(table: ComputeConfigTable, results: ComputeResults, hardware?: string): TableCheck {
  const shapes: TableShapeCheck[] = [];
  for (const s of results.shapes) {
    const e = entryOf(table, s);
    if (e === undefined) continue;
    const tuned = tunedCase(s);
    if (tuned !== undefined && !runsEntry(tuned, e))
      throw new Error(`${s.name}: the run's tuned kernel (${tuned.label}) is not the ${table.target} table's entry`);
    const tlx =
      e.tlx === undefined ? undefined : s.cases.find((c): c is ResultCase & { ms: number } => isEntryTlx(c, e.tlx!) && correct(c));
    const best = [tuned, tlx].filter((c) => c !== undefined).sort((a, b) => a.ms - b.ms)[0];
    if (best === undefined) throw new Error(`${s.name}: neither of the table's kernels ran correctly in this run`);
    const simError = hardware === undefined ? {} : { simError: simulatedMs(s, entryConfig(e), hardware) / best.ms - 1 };
    shapes.push({
      name: s.name,
      ratio: s.cublas.ms / best.ms,
      backend: best === tlx ? "tlx" : "triton",
      ms: best.ms,
      tlxMissing: e.tlx !== undefined && tlx === undefined,
      ...simError,
    });
  }
  if (shapes.length === 0) throw new Error(`the run holds no shape of the ${table.target} table`);
  const ratios = shapes.map((x) => x.ratio);
  return {
    shapes,
    geomean: gmean(ratios),
    min: Math.min(...ratios),
    below95: ratios.filter((r) => r < 0.95).length,
  };
}

/** Several runs' checks pooled: per shape the geometric mean of its ratios over the runs holding it. */
export interface PooledCheck {
  readonly shapes: readonly { readonly name: string; readonly ratio: number; readonly runs: number }[];
  readonly geomean: number;
  readonly min: number;
  readonly below95: number;
}

/**
 * `checks` (one per run, `checkTable`) pooled: cuBLAS ÷ the table's faster kernel per shape as
 * the geometric mean over the runs that hold the shape, then the geometric mean, minimum and
 * count below 0.95 over the shapes — run-to-run noise of one shape averaged before it is judged.
 * @throws {Error} when `checks` is empty.
 */
export function poolChecks(checks: readonly TableCheck[]): PooledCheck {
  if (checks.length === 0) throw new Error("no run to pool");
  const byShape = new Map<string, number[]>();
  for (const c of checks) for (const x of c.shapes) byShape.set(x.name, [...(byShape.get(x.name) ?? []), x.ratio]);
  const shapes = [...byShape].map(([name, r]) => ({ name, ratio: gmean(r), runs: r.length }));
  const ratios = shapes.map((x) => x.ratio);
  return { shapes, geomean: gmean(ratios), min: Math.min(...ratios), below95: ratios.filter((r) => r < 0.95).length };
}

/** Two tables on one run, over the shapes where it measured both tables' kernels. */
export interface TableComparison {
  readonly shapes: readonly { readonly name: string; readonly before: number; readonly after: number }[];
  readonly before: number;
  readonly after: number;
}

/**
 * `before` and `after` (two tables of one target) on `results`: cuBLAS ÷ each table's faster kernel
 * per shape (`checkTable`), geometric means over the shapes where neither table's TLX kernel is
 * missing from the run — a table whose pick the run did not measure would be judged by its Triton
 * kernel alone. @throws like `checkTable`, or when no shape is left.
 */
export function compareTables(before: ComputeConfigTable, after: ComputeConfigTable, results: ComputeResults): TableComparison {
  const a = checkTable(before, results);
  const b = new Map(checkTable(after, results).shapes.map((x) => [x.name, x]));
  const shapes = a.shapes.flatMap((x) => {
    const y = b.get(x.name);
    return y === undefined || x.tlxMissing || y.tlxMissing ? [] : [{ name: x.name, before: x.ratio, after: y.ratio }];
  });
  if (shapes.length === 0) throw new Error("no shape of the run has both tables' kernels measured");
  return { shapes, before: gmean(shapes.map((x) => x.before)), after: gmean(shapes.map((x) => x.after)) };
}

function main(argv: readonly string[]): void {
  const [target, runs] = argv;
  const i = argv.indexOf("--sim");
  const hardware = i < 0 ? undefined : argv[i + 1];
  if (target === undefined || runs === undefined) {
    console.error("usage: tsx scripts/compute-tables/table-check.ts <target> <run.json>[,<run.json>...]");
    process.exit(2);
  }
  const table = computeConfigs(target as TargetName);
  if (table === null) throw new Error(`no tuned table for ${target}`);
  const ai = argv.indexOf("--against");
  const against = ai < 0 ? undefined : parseComputeConfigs(JSON.parse(readFileSync(argv[ai + 1] ?? "", "utf8")));
  const checks: TableCheck[] = [];
  for (const path of runs.split(",")) {
    const r = checkTable(table, JSON.parse(readFileSync(path, "utf8")) as ComputeResults, hardware);
    checks.push(r);
    const low = [...r.shapes].sort((a, b) => a.ratio - b.ratio).slice(0, 4);
    console.log(
      `${path}: the ${target} table's kernels at ${r.geomean.toFixed(3)}x cuBLAS by geometric mean over ${r.shapes.length} shapes, min ${r.min.toFixed(3)}, ${r.below95} below 0.95; lowest ${low.map((x) => `${x.name} ${x.ratio.toFixed(3)} (${x.backend})`).join(", ")}`,
    );
    if (against !== undefined) {
      const c = compareTables(against, table, JSON.parse(readFileSync(path, "utf8")) as ComputeResults);
      console.log(
        `  against ${argv[ai + 1]}: ${c.before.toFixed(3)}x -> ${c.after.toFixed(3)}x over the ${c.shapes.length} shapes where the run measured both tables' kernels`,
      );
    }
    const errors = r.shapes.flatMap((x) => (x.simError === undefined ? [] : [{ name: x.name, e: x.simError }]));
    if (errors.length > 0) {
      const worst = errors.reduce((a, b) => (Math.abs(b.e) > Math.abs(a.e) ? b : a));
      const mean = errors.reduce((a, b) => a + Math.abs(b.e), 0) / errors.length;
      console.log(
        `  simulator (${hardware}) against the faster kernel: mean absolute error ${(100 * mean).toFixed(1)}%, worst ${worst.name} ${(100 * worst.e).toFixed(1)}%, ${errors.filter((x) => Math.abs(x.e) > 0.15).length} shapes beyond 15%`,
      );
    }
  }
  if (checks.length > 1) {
    const p = poolChecks(checks);
    const low = [...p.shapes].sort((a, b) => a.ratio - b.ratio).slice(0, 4);
    console.log(
      `pooled over ${checks.length} runs (per shape the geometric mean over the runs): ${p.geomean.toFixed(3)}x cuBLAS over ${p.shapes.length} shapes, min ${p.min.toFixed(3)}, ${p.below95} below 0.95; lowest ${low.map((x) => `${x.name} ${x.ratio.toFixed(3)}`).join(", ")}`,
    );
  }
}

if (process.argv[1]?.endsWith("table-check.ts")) main(process.argv.slice(2));
