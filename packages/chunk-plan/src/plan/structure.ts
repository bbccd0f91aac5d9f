// Structural checks every plan rewrite relies on: one rank plan per mesh rank in order,
// regions inside declared tensors, peers inside the mesh, op dependencies that resolve.
// (Semantic validation, coverage and deadlock freedom, is the validate module's job.)
import type { ChunkPlan, Dependency, Op, Region, TensorDecl } from "../model/schema.js";
import { PlanError } from "./errors.js";
import { worldSize } from "./mesh.js";
import { OpTable } from "./op-table.js";
import { formatRegionShort } from "./shard.js";

function checkRegion(region: Region, tensors: ReadonlyMap<string, TensorDecl>, where: string): void {
  const tensor = tensors.get(region.tensor);
  if (tensor === undefined) {
    throw new PlanError("unknown-tensor", `${where}: tensor ${region.tensor} is not declared in plan.tensors`);
  }
  const dims = tensor.shape.length;
  if (region.offsets.length !== dims || region.sizes.length !== dims) {
    throw new PlanError(
      "shape-mismatch",
      `${where}: region ${formatRegionShort(region)} has ${region.offsets.length} offsets and ${region.sizes.length} sizes; tensor ${tensor.name} has ${dims} dimensions`,
    );
  }
  for (let d = 0; d < dims; d++) {
    if (region.offsets[d]! + region.sizes[d]! > tensor.shape[d]!) {
      throw new PlanError(
        "out-of-bounds",
        `${where}: region ${formatRegionShort(region)} ends past tensor ${tensor.name}'s extent ${tensor.shape[d]} on axis ${d}`,
      );
    }
  }
}

function checkRank(rank: number, world: number, where: string): void {
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= world) {
    throw new PlanError("invalid-rank", `${where}: rank ${rank} is outside the mesh (0 .. ${world - 1})`);
  }
}

function checkDependency(plan: ChunkPlan, dep: Dependency, tensors: ReadonlyMap<string, TensorDecl>, where: string): void {
  const world = plan.ranks.length;
  checkRank(dep.rank, world, `${where} dependency`);
  if (dep.kind === "compute") {
    checkRegion(dep.region, tensors, `${where} compute dependency`);
    return;
  }
  if (plan.ranks[dep.rank]?.streams[dep.stream]?.[dep.index] === undefined) {
    throw new PlanError(
      "invalid-dependency",
      `${where}: dependency r${dep.rank}.s${dep.stream}#${dep.index} names no op; add that op or fix the reference`,
    );
  }
}

/** Throws a {@link PlanError} naming the first structural fault of `plan`. */
export function checkPlanStructure(plan: ChunkPlan): void {
  const world = worldSize(plan.mesh);
  if (plan.ranks.length !== world) {
    throw new PlanError("invalid-rank", `the plan lists ${plan.ranks.length} ranks; its mesh has ${world}`);
  }
  const tensors = new Map<string, TensorDecl>();
  for (const t of plan.tensors) {
    if (tensors.has(t.name)) throw new PlanError("duplicate-tensor", `tensor ${t.name} is declared twice`);
    tensors.set(t.name, t);
  }
  // Plain loops, and an op's address is only spelled out when something is wrong with it:
  // this runs on every plan a template or rewrite builds (10^5 to 10^6 ops).
  const table = new OpTable(plan.ranks);
  plan.ranks.forEach((rp, r) => {
    if (rp.rank !== r) {
      throw new PlanError("invalid-rank", `plan.ranks[${r}] is for rank ${rp.rank}; list rank plans in rank order`);
    }
    rp.local.forEach((region, i) => checkRegion(region, tensors, `r${r} local[${i}]`));
    for (let s = 0; s < rp.streams.length; s++) {
      const ops = rp.streams[s]!;
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i]!;
        if (!opLooksSound(table, op, tensors, world)) checkOp(plan, op, tensors, world, `op r${r}.s${s}#${i}`);
      }
    }
  });
}

/** The checks of {@link checkOp}, throwing nothing: true when the op passes them all. */
function opLooksSound(table: OpTable, op: Op, tensors: ReadonlyMap<string, TensorDecl>, world: number): boolean {
  // A dst that is the src object itself (templates share one frozen region per chunk) fits when the src does.
  if (!regionFits(op.src, tensors) || (op.dst !== op.src && !regionFits(op.dst, tensors))) return false;
  if (op.kind === "p2p" && !rankInMesh(op.peer, world)) return false;
  if (op.kind === "collective") for (const q of op.ranks) if (!rankInMesh(q, world)) return false;
  // Indexed, not for-of: iterating a frozen (shared) list allocates a result per step.
  const deps = op.deps;
  for (let k = 0; k < deps.length; k++) {
    const dep = deps[k]!;
    if (!rankInMesh(dep.rank, world)) return false;
    if (dep.kind === "compute") {
      if (!regionFits(dep.region, tensors)) return false;
    } else if (!table.has(dep.rank, dep.stream, dep.index)) return false;
  }
  return true;
}

function rankInMesh(rank: number, world: number): boolean {
  return Number.isSafeInteger(rank) && rank >= 0 && rank < world;
}

/** True when {@link checkRegion} would accept `region`. */
function regionFits(region: Region, tensors: ReadonlyMap<string, TensorDecl>): boolean {
  const tensor = tensors.get(region.tensor);
  if (tensor === undefined) return false;
  const dims = tensor.shape.length;
  const { offsets, sizes } = region;
  if (offsets.length !== dims || sizes.length !== dims) return false;
  for (let d = 0; d < dims; d++) if (!(offsets[d]! + sizes[d]! <= tensor.shape[d]!)) return false;
  return true;
}

/** Throws the first fault of one op (the slow path, with messages). */
function checkOp(plan: ChunkPlan, op: Op, tensors: ReadonlyMap<string, TensorDecl>, world: number, where: string): void {
  checkRegion(op.src, tensors, `${where} src`);
  checkRegion(op.dst, tensors, `${where} dst`);
  if (op.kind === "p2p") checkRank(op.peer, world, `${where} peer`);
  if (op.kind === "collective") op.ranks.forEach((q) => checkRank(q, world, `${where} ranks`));
  op.deps.forEach((dep) => checkDependency(plan, dep, tensors, where));
}
