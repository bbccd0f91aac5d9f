// Deep copies of plan data, written out for the model's shapes: plans of a thousand ranks
// hold ~10^6 regions, and a generic structured clone of them costs seconds.
import type { ChunkPlan, Dependency, Op, RankPlan, Region } from "../model/schema.js";

/** A fresh copy of `region`. */
export function cloneRegion(region: Region): Region {
  return { tensor: region.tensor, offsets: [...region.offsets], sizes: [...region.sizes] };
}

/** A fresh copy of `dep`. */
export function cloneDependency(dep: Dependency): Dependency {
  return dep.kind === "op"
    ? { kind: "op", rank: dep.rank, stream: dep.stream, index: dep.index }
    : { kind: "compute", rank: dep.rank, region: cloneRegion(dep.region) };
}

/** A fresh copy of `op`, with `deps` replaced when given. */
export function cloneOp(op: Op, deps?: Dependency[]): Op {
  const copy = { ...op, src: cloneRegion(op.src), dst: cloneRegion(op.dst), deps: deps ?? op.deps.map(cloneDependency) };
  if (copy.kind === "collective") copy.ranks = [...copy.ranks];
  return copy;
}

/** A fresh copy of `rp`. */
export function cloneRankPlan(rp: RankPlan): RankPlan {
  return { rank: rp.rank, local: rp.local.map(cloneRegion), streams: rp.streams.map((ops) => ops.map((op) => cloneOp(op))) };
}

/** A fresh copy of everything in `plan` but its ranks and signals (the parts rewrites rebuild). */
export function clonePlanHeader(plan: ChunkPlan): Omit<ChunkPlan, "ranks" | "signals"> {
  return {
    $schema: plan.$schema,
    name: plan.name,
    mesh: { shape: [...plan.mesh.shape] },
    tensors: plan.tensors.map((t) => structuredClone(t)),
    ...(plan.claim === undefined ? {} : { claim: structuredClone(plan.claim) }),
  };
}

/** A fresh copy of `plan`. */
export function clonePlan(plan: ChunkPlan): ChunkPlan {
  return {
    ...clonePlanHeader(plan),
    ranks: plan.ranks.map(cloneRankPlan),
    ...(plan.signals === undefined ? {} : { signals: structuredClone(plan.signals) }),
  };
}
