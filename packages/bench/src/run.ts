// `pnpm bench [suite...]`: runs the CPU suites (`src/suites/*.bench.ts`, or those whose file name
// starts with an argument), each default-exporting `() => SuiteResult | Promise<SuiteResult>`, into
// today's run of the evidence tree, results/runs/cpu-bench-<date>/, and describes it in run.json.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { fmt, machineDescription, RESULTS_DIR, writeSuite, type SuiteResult } from "./harness.js";
import { RUN_SCHEMA, RunMeta } from "./results/schema.js";

/** What each suite measures, for the run's metadata: its operator of the index and its world sizes. */
const SUITES: Record<string, { operator: RunMeta["operators"][number]; worlds: number[] }> = {
  mapping: { operator: "mapping", worlds: [2, 3, 4, 5, 6, 7, 8] },
  compile: { operator: "compile", worlds: [8] },
  "plan-scale": { operator: "chunk-plan", worlds: [64, 256, 1024] },
};

/** run.json of a CPU bench run: every suite the folder holds, its first case's median as the headline. */
export function cpuRun(dir: string, date: string): RunMeta {
  const suites = readdirSync(dir)
    .filter((f) => f.endsWith(".json") && f !== "run.json")
    .map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")) as SuiteResult)
    .filter((s) => SUITES[s.suite] !== undefined && s.measurements.length > 0);
  const first = suites.map((s) => `${s.measurements[0]!.name} ${fmt(s.measurements[0]!.medianMs)} ms`);
  const headline = (): string => `Medians on ${machineDescription()}: ${first.join("; ")}.`;
  while (headline().length > 400 && first.length > 1) first.pop(); // the schema's bound on a headline
  return RunMeta.parse({
    $schema: RUN_SCHEMA,
    date,
    device: "CPU",
    operators: suites.map((s) => SUITES[s.suite]!.operator),
    worlds: [...new Set(suites.flatMap((s) => SUITES[s.suite]!.worlds))].sort((a, b) => a - b),
    mode: ["cpu"],
    headline: headline(),
    decided: "Nothing by itself: a measurement of the CPU packages' speed on this machine, to compare later changes with.",
    provenance: [`pnpm bench ${suites.map((s) => s.suite).join(" ")} (packages/bench/src/run.ts)`],
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const suitesDir = join(dirname(fileURLToPath(import.meta.url)), "suites");
  const wanted = process.argv.slice(2);
  const files = readdirSync(suitesDir)
    .filter((f) => f.endsWith(".bench.ts") || f.endsWith(".bench.js"))
    .filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)))
    .sort();
  if (files.length === 0) {
    console.error(`no benchmark suite matches ${wanted.join(", ") || "*"} in ${suitesDir}`);
    process.exit(2);
  }
  const date = new Date().toISOString().slice(0, 10);
  const dir = join(RESULTS_DIR, `cpu-bench-${date}`);
  mkdirSync(dir, { recursive: true });
  for (const file of files) {
    console.error(`bench: running ${file}...`);
    const mod = (await import(pathToFileURL(join(suitesDir, file)).href)) as { default: () => SuiteResult | Promise<SuiteResult> };
    process.stdout.write(`${writeSuite(await mod.default(), dir)}\n`);
  }
  writeFileSync(join(dir, "run.json"), `${JSON.stringify(cpuRun(dir, date), null, 2)}\n`);
  console.error(`bench: results/runs/cpu-bench-${date}/ written; run pnpm --filter @ovl/bench results:index`);
}
