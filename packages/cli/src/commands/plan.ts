// `ovl plan`: build an operator's chunk plan from a template and show it (a readable dump),
// print it as `ovl.chunk-plan/v1` JSON, or write plan.json, plan.txt and plan.mmd.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { dumpPlan, planToMermaid, serializePlan, type ChunkPlan } from "@ovl/chunk-plan";
import { buildPlan } from "../build.js";
import type { CommandOutput } from "../io.js";
import { describeProblem, type Problem } from "../problem.js";

/** Ops of every rank of a plan. */
export function countOps(plan: ChunkPlan): number {
  return plan.ranks.reduce((n, r) => n + r.streams.reduce((m, s) => m + s.length, 0), 0);
}

/** Run `ovl plan`: with `outDir`, write the plan's files; `--json` prints the plan itself. */
export function planCommand(p: Problem, outDir: string | undefined): CommandOutput & { plan: ChunkPlan } {
  const plan = buildPlan(p);
  const ops = countOps(plan);
  const head = `${plan.name}: ${describeProblem(p)}; ${ops} ops over ${plan.ranks.length} ranks`;
  if (outDir === undefined) {
    return { plan, json: JSON.parse(serializePlan(plan)), lines: [head, "", dumpPlan(plan).trimEnd()] };
  }
  const dir = resolve(outDir);
  mkdirSync(dir, { recursive: true });
  const files = {
    "plan.json": serializePlan(plan),
    "plan.txt": dumpPlan(plan),
    // A Mermaid graph of every rank is unreadable past a few; show the first three.
    "plan.mmd": planToMermaid({ ...plan, ranks: plan.ranks.slice(0, 3) }),
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const paths = Object.keys(files).map((f) => join(dir, f));
  return { plan, json: { plan: plan.name, ops, ranks: plan.ranks.length, files: paths }, lines: [head, ...paths.map((f) => `wrote ${f}`)] };
}
