// Interleaved before/after runs of the plan-scale suite's plan and validate cases (64, 256 and
// 1024 ranks, the suite's own measure options): each run is a fresh process on one build of
// @ovl/chunk-plan, the builds alternate, and the medians of every run are written with the
// machine's load to results/cpu/plan-scale-1024-<date>.{json,md}. On a shared machine,
// alternating is what makes a before/after comparison fair.
//
//   npx tsx src/plan-scale-compare.ts --before <chunk-plan index.js> [--before-label X]
//       [--after <index.js>] [--after-label Y] [--runs 3] [--name YYYY-MM-DD] [--note "..."]
//
// `--name` is the file's suffix (default today's date); the results state the measured times.
//
// `--after` defaults to the workspace's built @ovl/chunk-plan (build it first).
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { machineDescription, RESULTS_DIR, type Measurement } from "./harness.js";
import { planAndValidateCases, type PlanScaleLibrary } from "./suites/plan-scale.bench.js";

const WORLDS = [64, 256, 1024];

interface Run {
  side: "before" | "after";
  at: string;
  loadAverage1m: number;
  measurements: Pick<Measurement, "name" | "iterations" | "medianMs" | "p10Ms" | "p90Ms">[];
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}

function round(x: number): number {
  return Math.round(x * 10) / 10;
}

/** One process's measurements on the library at `lib` (printed as JSON on stdout). */
async function child(lib: string): Promise<void> {
  const mod = (await import(pathToFileURL(lib).href)) as PlanScaleLibrary;
  const out: Run["measurements"] = [];
  for (const world of WORLDS) {
    for (const m of planAndValidateCases(world, mod).measurements) {
      out.push({ name: m.name, iterations: m.iterations, medianMs: round(m.medianMs), p10Ms: round(m.p10Ms), p90Ms: round(m.p90Ms) });
    }
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 === 1 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

async function main(): Promise<void> {
  const childLib = arg("child");
  if (childLib !== undefined) return child(childLib);
  const before = arg("before");
  if (before === undefined) {
    console.error("usage: plan-scale-compare.ts --before <chunk-plan index.js> [--after <index.js>] [--runs 3]");
    process.exit(2);
  }
  const after = arg("after") ?? fileURLToPath(import.meta.resolve("@ovl/chunk-plan"));
  const runs = Number(arg("runs") ?? 3);
  const date = new Date().toISOString().slice(0, 10);
  const name = arg("name") ?? date;
  const libs = { before: resolve(before), after: resolve(after) };
  const results: Run[] = [];
  for (let i = 0; i < runs; i++) {
    for (const side of ["before", "after"] as const) {
      const loadAverage1m = round(loadavg()[0] ?? 0);
      const at = new Date().toISOString();
      const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--child", libs[side]], {
        encoding: "utf8",
        maxBuffer: 1 << 24,
      });
      if (r.status !== 0) throw new Error(`run ${i + 1} (${side}) failed: ${r.stderr}`);
      const measurements = JSON.parse(r.stdout.trim().split("\n").pop() ?? "[]") as Run["measurements"];
      results.push({ side, at, loadAverage1m, measurements });
      const pv = measurements.find((m) => m.name === "plan + validate: hierarchical AllGather, 1024 ranks");
      console.error(`run ${i + 1} ${side}: plan + validate at 1024 ranks ${pv?.medianMs} ms (load ${loadAverage1m})`);
    }
  }
  const names = results[0]?.measurements.map((m) => m.name) ?? [];
  const summary = names.map((name) => {
    const per = (side: "before" | "after"): { median: number; min: number; max: number; runs: number[] } => {
      const xs = results.filter((r) => r.side === side).map((r) => r.measurements.find((m) => m.name === name)?.medianMs ?? Number.NaN);
      return { median: round(median(xs)), min: Math.min(...xs), max: Math.max(...xs), runs: xs };
    };
    return { name, before: per("before"), after: per("after") };
  });
  const json = {
    what: "plan (allGatherHierarchical) and validate (validatePlan) of a hierarchical AllGather, mesh [world/8, 8], split 4, x = [16*world, 1024] bf16, the plan-scale suite's first three cases (packages/bench/src/suites/plan-scale.bench.ts), run by packages/bench/src/plan-scale-compare.ts",
    date,
    machine: { nproc: cpus().length, cpu: machineDescription(), node: process.version, note: arg("note") ?? "" },
    before: { label: arg("before-label") ?? "", lib: before },
    after: { label: arg("after-label") ?? "", lib: after },
    interleaved: {
      note: `${runs} runs per build, alternated (before, after), each a fresh process; per case, the median over the runs of each run's median (min-max over the runs)`,
      runs: results,
    },
    summary,
  };
  const base = join(RESULTS_DIR, "cpu", `plan-scale-1024-${name}`);
  writeFileSync(`${base}.json`, `${JSON.stringify(json, null, 2)}\n`);
  const fmt = (s: { median: number; min: number; max: number }): string => `${s.median} (${s.min}–${s.max})`;
  const md = [
    `# plan-scale at 1024 ranks, before and after (measured ${results[0]?.at.slice(0, 16) ?? date} to ${results.at(-1)?.at.slice(0, 16) ?? date} UTC)`,
    "",
    "Hierarchical AllGather (`allGatherHierarchical`, mesh [world/8, 8], split 4, x = [16·world, 1024] bf16), planned and proven by `validatePlan`: the plan-scale suite's first three cases, run by `src/plan-scale-compare.ts`.",
    "",
    `Machine: ${machineDescription()}, Node ${process.version}.${json.machine.note ? ` ${json.machine.note}` : ""}`,
    "",
    `Before: ${json.before.label || before}. After: ${json.after.label || after}. ${json.interleaved.note}.`,
    "",
    "| case | before median ms (min–max) | after median ms (min–max) |",
    "| --- | ---: | ---: |",
    ...summary.map((s) => `| ${s.name} | ${fmt(s.before)} | ${fmt(s.after)} |`),
    "",
    "## Runs, 1024 ranks",
    "",
    "| run | build | started | load (1 min) | plan + validate ms (p10–p90) | plan ms | validate ms |",
    "| ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ...results.map((r, i) => {
      const m = (prefix: string): Run["measurements"][number] | undefined =>
        r.measurements.find((x) => x.name === `${prefix}: hierarchical AllGather, 1024 ranks`);
      const pv = m("plan + validate");
      return `| ${Math.floor(i / 2) + 1} | ${r.side} | ${r.at.slice(11, 19)} | ${r.loadAverage1m} | ${pv?.medianMs} (${pv?.p10Ms}–${pv?.p90Ms}) | ${m("plan")?.medianMs} | ${m("validate")?.medianMs} |`;
    }),
    "",
  ].join("\n");
  writeFileSync(`${base}.md`, md);
  process.stdout.write(md);
}

await main();
