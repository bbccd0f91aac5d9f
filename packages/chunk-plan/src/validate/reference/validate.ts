// Reference copy (test oracle): the validator as it was before its per-op arrays, region
// interning and CSR rewrite, kept so a property test can check that the fast path reports
// exactly what this straightforward version reports. Not part of the package's surface.
// validatePlan: the four phases of AutoOverlap-style plan validation, run before anything
// executes. Structure first (later phases trust its references), then writes, then the
// happens-before graph (deadlocks, races), then symbolic execution against the claim.
import type { ChunkPlan } from "../../model/schema.js";
import { Buffers } from "./buffers.js";
import { claimTargets, type ClaimTargets } from "./claim.js";
import { Findings, InvalidPlanError, PlanValidationError, formatOp } from "../errors.js";
import { execute, checkClaim } from "./execute.js";
import { buildGraph, findCycle } from "./graph.js";
import { planAtoms } from "./plan-atoms.js";
import { indexPlan, opRef } from "./plan-index.js";
import { checkRaces } from "./races.js";
import { checkStructure } from "../structure.js";
import { ValueTable } from "../values.js";
import { checkMissing, recordWrites } from "./writes.js";

/** Options of {@link validatePlan}. */
export interface ValidateOptions {
  /** Stop collecting findings after this many (default 50). */
  maxErrors?: number;
  /** Run symbolic execution against `plan.claim` (default true; needs a claim). */
  symbolic?: boolean;
}

/** Result of {@link validatePlan}: either valid, or every finding (up to `maxErrors`). */
export type PlanValidation = { ok: true } | { ok: false; errors: PlanValidationError[] };

function done(out: Findings): PlanValidation | undefined {
  return out.errors.length > 0 ? { ok: false, errors: out.errors } : undefined;
}

/**
 * Proves, before anything runs, what DESIGN.md asks of a chunk plan: every destination
 * region is written exactly once, every dependency resolves, no cycle exists across ranks
 * (deadlock), every read is ordered after the writes it needs, and symbolic execution
 * yields exactly the collective in `plan.claim` ("AllGather's output holds every shard at
 * its place", ReduceScatter's slab i the sum of all ranks' slab i, ...). Never throws on a
 * plan that parses with the `ChunkPlan` schema. Near-linear in the plan's ops and atoms;
 * see docs/validate.md.
 */
export function validatePlan(plan: ChunkPlan, options: ValidateOptions = {}): PlanValidation {
  const out = new Findings(Math.max(1, options.maxErrors ?? 50));
  const decls = checkStructure(plan, out);
  const structural = done(out);
  if (structural) return structural;

  const { index, unmatched } = indexPlan(plan);
  for (const u of unmatched) {
    const ref = opRef(index, u.op);
    out.add(new PlanValidationError("collective-mismatch", `${formatOp(ref)}: collective is unmatched: ${u.reason}`, ref));
  }
  const matched = done(out);
  if (matched) return matched;

  const world = index.world;
  const claim: ClaimTargets | undefined = plan.claim === undefined ? undefined : (claimTargets(plan.claim, decls, world) as ClaimTargets);
  const atoms = planAtoms(index, decls, claim);
  const buffers = new Buffers(atoms, world);
  recordWrites(index, atoms, buffers, out);
  if (claim !== undefined && plan.claim !== undefined) checkMissing(atoms, buffers, claim, plan.claim.collective, out);

  const graph = buildGraph(index);
  if (!graph.acyclic) {
    const cycle = findCycle(graph).map((node) => opRef(index, node));
    const first = cycle[0];
    out.add(
      new PlanValidationError(
        "deadlock",
        `dependency cycle (deadlock): ${cycle.map(formatOp).join(" → ")} → back to the first; remove or reverse one of these dependencies`,
        { ...first, cycle },
      ),
    );
    return { ok: false, errors: out.errors };
  }
  checkRaces(index, atoms, buffers, graph, out);
  const ordering = done(out);
  if (ordering) return ordering;

  if (claim !== undefined && plan.claim !== undefined && options.symbolic !== false) {
    const table = new ValueTable();
    execute(index, atoms, buffers, graph, table, out);
    checkClaim(atoms, buffers, table, claim, plan.claim.collective, plan.claim.reduce ?? "sum", out);
  }
  return done(out) ?? { ok: true };
}

/** {@link validatePlan}, throwing an {@link InvalidPlanError} (with every finding) when invalid. */
export function assertValidPlan(plan: ChunkPlan, options: ValidateOptions = {}): void {
  const result = validatePlan(plan, options);
  if (!result.ok) throw new InvalidPlanError(plan.name, result.errors);
}
