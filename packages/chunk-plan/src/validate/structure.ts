// Phase 1 of validation: structure. Tensors declared once; every region names a declared
// tensor with its number of axes and lies inside it; transfers move equal shapes of one
// dtype; collectives, peers, ranks and dependencies stay inside the mesh.
import type { ChunkPlan, CollectiveOp, Dependency, Op, Region, TensorDecl } from "../model/schema.js";
import { formatRegion, inBounds } from "../region/box.js";
import { OpTable } from "../plan/op-table.js";
import { claimTargets } from "./claim.js";
import { type Findings, PlanValidationError, type OpAddress } from "./errors.js";

interface Where extends Partial<OpAddress> {
  what: string;
}

function at(w: Where): string {
  return w.stream === undefined ? `rank ${w.rank ?? "?"}` : `rank ${w.rank} stream ${w.stream} op ${w.index}`;
}

/** True when the region has the declaration's axes and lies inside it (a tight loop: called per op). */
function fits(region: Region, decl: TensorDecl): boolean {
  const shape = decl.shape;
  const { offsets, sizes } = region;
  if (offsets.length !== shape.length || sizes.length !== shape.length) return false;
  for (let d = 0; d < shape.length; d++) {
    const o = offsets[d] as number;
    const sz = sizes[d] as number;
    if (o < 0 || sz < 1 || o + sz > (shape[d] as number)) return false;
  }
  return true;
}

/** Checks one region against the declarations; returns its declaration when valid. */
function checkRegion(region: Region, decls: Map<string, TensorDecl>, w: Where, out: Findings): TensorDecl | undefined {
  const decl = decls.get(region.tensor);
  if (decl !== undefined && fits(region, decl)) return decl;
  const loc = { rank: w.rank, stream: w.stream, index: w.index, region };
  if (decl === undefined) {
    out.add(
      new PlanValidationError(
        "unknown-tensor",
        `${at(w)}: ${w.what} ${formatRegion(region)} names an undeclared tensor; declare ${region.tensor} in plan.tensors`,
        loc,
      ),
    );
    return undefined;
  }
  const dims = decl.shape.length;
  if (region.offsets.length !== dims || region.sizes.length !== dims) {
    out.add(
      new PlanValidationError(
        "rank-mismatch",
        `${at(w)}: ${w.what} ${formatRegion(region)} has ${region.sizes.length} axes but ${decl.name} has ${dims}`,
        loc,
      ),
    );
    return undefined;
  }
  if (!inBounds(region, decl)) {
    out.add(
      new PlanValidationError(
        "out-of-bounds",
        `${at(w)}: ${w.what} ${formatRegion(region)} is outside ${decl.name} of shape [${decl.shape.join(", ")}]`,
        loc,
      ),
    );
  }
  return undefined;
}

function sameSizes(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let d = 0; d < a.length; d++) if (a[d] !== b[d]) return false;
  return true;
}

function checkCollectiveShape(op: CollectiveOp, w: Where, world: number, out: Findings): void {
  const loc = { rank: w.rank, stream: w.stream, index: w.index };
  const n = op.ranks.length;
  if (new Set(op.ranks).size !== n)
    out.add(new PlanValidationError("collective-shape", `${at(w)}: collective lists a rank twice in [${op.ranks.join(", ")}]`, loc));
  const outside = op.ranks.find((r) => r >= world);
  if (outside !== undefined)
    out.add(
      new PlanValidationError("rank-out-of-mesh", `${at(w)}: collective names rank ${outside}, outside the mesh of ${world} ranks`, loc),
    );
  if (!op.ranks.includes(w.rank ?? -1))
    out.add(
      new PlanValidationError(
        "collective-mismatch",
        `${at(w)}: a ${op.collective} over [${op.ranks.join(", ")}] is listed on rank ${w.rank}, which is not one of its ranks`,
        loc,
      ),
    );
  const dims = op.src.sizes.length;
  if (op.axis >= dims || op.dst.sizes.length !== dims) {
    out.add(
      new PlanValidationError(
        "bad-axis",
        `${at(w)}: collective axis ${op.axis} needs src and dst with the same axes, more than ${op.axis}`,
        loc,
      ),
    );
    return;
  }
  const s = op.src.sizes;
  const d = op.dst.sizes;
  const others = s.every((x, k) => k === op.axis || x === d[k]);
  const sa = s[op.axis] ?? 0;
  const da = d[op.axis] ?? 0;
  const ok =
    others &&
    (op.collective === "all-gather"
      ? da === n * sa
      : op.collective === "reduce-scatter"
        ? sa === n * da
        : op.collective === "all-reduce"
          ? sa === da
          : sa === da && sa % n === 0);
  if (!ok) {
    const want = {
      "all-gather": `dst must be ${n}× src along axis ${op.axis}`,
      "reduce-scatter": `src must be ${n}× dst along axis ${op.axis}`,
      "all-reduce": "src and dst must have the same sizes",
      "all-to-all": `src and dst must have the same sizes, divisible by ${n} along axis ${op.axis}`,
    }[op.collective];
    out.add(
      new PlanValidationError(
        "collective-shape",
        `${at(w)}: ${op.collective} src ${formatRegion(op.src)} and dst ${formatRegion(op.dst)}: ${want}`,
        loc,
      ),
    );
  }
}

function checkDep(dep: Dependency, plan: ChunkPlan, decls: Map<string, TensorDecl>, world: number, w: Where, out: Findings): void {
  const loc = { rank: w.rank, stream: w.stream, index: w.index };
  if (dep.rank >= world) {
    out.add(new PlanValidationError("rank-out-of-mesh", `${at(w)}: depends on rank ${dep.rank}, outside the mesh of ${world} ranks`, loc));
    return;
  }
  if (dep.kind === "compute") {
    checkRegion(dep.region, decls, w, out);
    return;
  }
  const len = plan.ranks[dep.rank]?.streams[dep.stream]?.length;
  if (len === undefined || dep.index >= len) {
    out.add(
      new PlanValidationError(
        "missing-dep",
        `${at(w)}: depends on rank ${dep.rank} stream ${dep.stream} op ${dep.index}, which does not exist (that stream has ${len ?? "no"} ops)`,
        loc,
      ),
    );
  }
}

function checkOp(op: Op, plan: ChunkPlan, decls: Map<string, TensorDecl>, world: number, w: Where, out: Findings): void {
  const loc = { rank: w.rank, stream: w.stream, index: w.index };
  w.what = "compute dependency";
  for (const dep of op.deps) checkDep(dep, plan, decls, world, w, out);
  if (op.kind === "p2p") {
    if (op.peer >= world)
      out.add(new PlanValidationError("rank-out-of-mesh", `${at(w)}: peer ${op.peer} is outside the mesh of ${world} ranks`, loc));
    if (op.peer === w.rank) out.add(new PlanValidationError("p2p-self", `${at(w)}: p2p ${op.side} to itself; use a local-copy`, loc));
  }
  w.what = "src";
  const src = checkRegion(op.src, decls, w, out);
  w.what = "dst";
  const dst = checkRegion(op.dst, decls, w, out);
  if (src === undefined || dst === undefined) return;
  if (src.dtype !== dst.dtype) {
    out.add(new PlanValidationError("dtype-mismatch", `${at(w)}: moves ${src.name} (${src.dtype}) into ${dst.name} (${dst.dtype})`, loc));
  }
  if (op.kind === "collective") {
    checkCollectiveShape(op, w, world, out);
  } else if (!sameSizes(op.src.sizes, op.dst.sizes)) {
    out.add(
      new PlanValidationError("shape-mismatch", `${at(w)}: src ${formatRegion(op.src)} and dst ${formatRegion(op.dst)} differ in shape`, {
        ...loc,
        region: op.dst,
      }),
    );
  }
}

/**
 * True when {@link checkOp} would report nothing for point-to-point op or local copy `op`
 * on `rank`: the same checks, without building a location or a message (phase 1 visits
 * every op of plans of 10^5–10^6 ops; only an op that fails one is checked again, slowly).
 * Collectives always take the slow path.
 */
function opIsSound(op: Op, rank: number, table: OpTable, decls: Map<string, TensorDecl>, world: number): boolean {
  if (op.kind === "collective") return false;
  // Indexed, not for-of: iterating a frozen (shared) list allocates a result per step.
  const deps = op.deps;
  for (let k = 0; k < deps.length; k++) {
    const dep = deps[k]!;
    if (dep.rank >= world) return false;
    if (dep.kind === "compute") {
      const decl = decls.get(dep.region.tensor);
      if (decl === undefined || !fits(dep.region, decl)) return false;
    } else {
      if (!table.has(dep.rank, dep.stream, dep.index)) return false;
    }
  }
  if (op.kind === "p2p" && (op.peer >= world || op.peer === rank)) return false;
  const src = decls.get(op.src.tensor);
  // A dst that is the src object itself (templates share one frozen region per chunk): same
  // tensor, same box, so it fits, has the same dtype and the same sizes when the src fits.
  if (op.dst === op.src) return src !== undefined && fits(op.src, src);
  const dst = op.dst.tensor === op.src.tensor ? src : decls.get(op.dst.tensor);
  if (src === undefined || dst === undefined || !fits(op.src, src) || !fits(op.dst, dst)) return false;
  return src.dtype === dst.dtype && sameSizes(op.src.sizes, op.dst.sizes);
}

/** Runs phase 1; returns the tensor declarations by name (valid only when no finding was added). */
export function checkStructure(plan: ChunkPlan, out: Findings): Map<string, TensorDecl> {
  const decls = new Map<string, TensorDecl>();
  for (const t of plan.tensors) {
    if (decls.has(t.name))
      out.add(new PlanValidationError("duplicate-tensor", `tensor ${t.name} is declared twice; give each tensor one declaration`));
    else decls.set(t.name, t);
    if (t.strides !== undefined && t.strides.length !== t.shape.length) {
      out.add(new PlanValidationError("rank-mismatch", `tensor ${t.name} has ${t.shape.length} axes but ${t.strides.length} strides`));
    }
  }
  const world = plan.mesh.shape.reduce((a, b) => a * b, 1);
  if (plan.ranks.length !== world) {
    out.add(
      new PlanValidationError(
        "rank-plan-order",
        `the mesh has ${world} ranks but the plan lists ${plan.ranks.length} rank plans; list each rank exactly once`,
      ),
    );
  }
  plan.ranks.forEach((rp, i) => {
    if (rp.rank !== i) {
      out.add(
        new PlanValidationError(
          "rank-plan-order",
          `plan.ranks[${i}] is rank ${rp.rank}; rank plans must be listed in rank order, ranks[i].rank == i`,
          { rank: i },
        ),
      );
    }
  });
  if (out.errors.length > 0) return decls;
  if (plan.claim !== undefined) {
    const targets = claimTargets(plan.claim, decls, world);
    if (typeof targets === "string") out.add(new PlanValidationError("bad-claim", targets));
  }
  const table = new OpTable(plan.ranks);
  for (const rp of plan.ranks) {
    for (const region of rp.local) checkRegion(region, decls, { rank: rp.rank, what: "local region" }, out);
    const w: Where = { rank: rp.rank, stream: 0, index: 0, what: "" };
    rp.streams.forEach((stream, s) => {
      w.stream = s;
      for (let i = 0; i < stream.length && !out.full; i++) {
        const op = stream[i] as Op;
        if (opIsSound(op, rp.rank, table, decls, world)) continue;
        w.index = i;
        checkOp(op, plan, decls, world, w, out);
      }
    });
  }
  return decls;
}
