// Structural checks every plan rewrite relies on: one rank plan per mesh rank in order,
// regions inside declared tensors, peers inside the mesh, op dependencies that resolve.
// (Semantic validation, coverage and deadlock freedom, is the validate module's job.)
import type { ChunkPlan, Dependency, Region, TensorDecl } from "../model/schema.js";
import { PlanError } from "./errors.js";
import { worldSize } from "./mesh.js";
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
  region.offsets.forEach((o, d) => {
    if (o + region.sizes[d]! > tensor.shape[d]!) {
      throw new PlanError(
        "out-of-bounds",
        `${where}: region ${formatRegionShort(region)} ends past tensor ${tensor.name}'s extent ${tensor.shape[d]} on axis ${d}`,
      );
    }
  });
}

function checkRank(rank: number, world: number, where: string): void {
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= world) {
    throw new PlanError("invalid-rank", `${where}: rank ${rank} is outside the mesh (0 .. ${world - 1})`);
  }
}

function checkDependency(
  plan: ChunkPlan,
  dep: Dependency,
  tensors: ReadonlyMap<string, TensorDecl>,
  where: string,
): void {
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
  plan.ranks.forEach((rp, r) => {
    if (rp.rank !== r) {
      throw new PlanError("invalid-rank", `plan.ranks[${r}] is for rank ${rp.rank}; list rank plans in rank order`);
    }
    rp.local.forEach((region, i) => checkRegion(region, tensors, `r${r} local[${i}]`));
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        const where = `op r${r}.s${s}#${i}`;
        checkRegion(op.src, tensors, `${where} src`);
        checkRegion(op.dst, tensors, `${where} dst`);
        if (op.kind === "p2p") checkRank(op.peer, world, `${where} peer`);
        if (op.kind === "collective") op.ranks.forEach((q) => checkRank(q, world, `${where} ranks`));
        op.deps.forEach((dep) => checkDependency(plan, dep, tensors, where));
      }),
    );
  });
}
