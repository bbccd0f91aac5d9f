// `ovl validate`: prove a plan (a JSON file, or an operator's template) before anything
// runs: structure, exactly-once writes, deadlock, races and symbolic execution.
import { existsSync, readFileSync } from "node:fs";
import { parsePlanJson, validatePlan, type ChunkPlan } from "@ovl/chunk-plan";
import { buildPlan } from "../build.js";
import { CliError, UsageError } from "../errors.js";
import type { CommandOutput } from "../io.js";
import { parseOperator, resolveProblem, type ProblemFlags } from "../problem.js";
import { countOps } from "./plan.js";

/** Read an `ovl.chunk-plan/v1` file; `bad-file` when it is missing or not a plan. */
export function readPlanFile(path: string): ChunkPlan {
  if (!existsSync(path)) throw new UsageError("bad-file", `no plan file at ${path}; write one with: ovl plan ag-gemm --json > plan.json`);
  try {
    return parsePlanJson(readFileSync(path, "utf8"));
  } catch (e) {
    const issues = (e as { issues?: { path: string; message: string }[] }).issues ?? [];
    const detail = issues
      .slice(0, 3)
      .map((i) => `${i.path}: ${i.message}`)
      .join("; ");
    throw new UsageError("bad-file", `${path} is not an ovl.chunk-plan/v1 plan: ${detail || (e as Error).message}`);
  }
}

/** The plan `ovl validate` checks: a file path (ends in .json or exists) or an operator name. */
export function planOfTarget(target: string, flags: ProblemFlags): ChunkPlan {
  if (target.endsWith(".json") || existsSync(target)) return readPlanFile(target);
  return buildPlan(resolveProblem(parseOperator(target), flags));
}

/** Run `ovl validate`; an invalid plan is a CliError (`invalid-plan`, exit 1) after the findings are printed. */
export function validateCommand(plan: ChunkPlan): CommandOutput & { ok: boolean } {
  const t0 = performance.now();
  const verdict = validatePlan(plan);
  const ms = performance.now() - t0;
  const ops = countOps(plan);
  const summary = { plan: plan.name, world: plan.ranks.length, ops, ms: Math.round(ms * 10) / 10 };
  if (verdict.ok) {
    return {
      ok: true,
      json: { ok: true, ...summary, errors: [] },
      lines: [
        `${plan.name}: ok — ${ops} ops on ${plan.ranks.length} ranks; every destination written once, no deadlock, no race, the ${plan.claim?.collective ?? "plan"} proven (${summary.ms} ms)`,
      ],
    };
  }
  const errors = verdict.errors.map((e) => ({ code: e.code, message: e.message }));
  return {
    ok: false,
    json: { ok: false, ...summary, errors },
    lines: [
      `${plan.name}: INVALID — ${errors.length} finding${errors.length === 1 ? "" : "s"}`,
      ...errors.map((e) => `  ✗ ${e.code}: ${e.message}`),
    ],
  };
}

/** The error a failed validation exits with. */
export function invalidPlanError(plan: ChunkPlan): CliError {
  return new CliError("invalid-plan", `${plan.name} failed validation (see the findings above)`);
}
