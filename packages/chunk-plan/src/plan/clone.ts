// Deep copies of plan data, written out for the model's shapes: plans of a thousand ranks
// hold ~10^6 regions, and a generic structured clone of them costs seconds.
import type { ChunkPlan, Dependency, Op, RankPlan, Region } from "../model/schema.js";

/**
 * A fresh copy of a short number list. Array literals, not spreads: a literal has an
 * allocation site, so V8 learns that these arrays live as long as their plan and allocates
 * them in the old generation directly, instead of copying each one through the young
 * generation (most of the garbage collector's work when a large plan is built).
 */
export function copyNumbers(a: readonly number[]): number[] {
  switch (a.length) {
    case 1:
      return [a[0]!];
    case 2:
      return [a[0]!, a[1]!];
    case 3:
      return [a[0]!, a[1]!, a[2]!];
    case 4:
      return [a[0]!, a[1]!, a[2]!, a[3]!];
    default:
      return a.slice();
  }
}

/** A fresh copy of `region`. */
export function cloneRegion(region: Region): Region {
  return { tensor: region.tensor, offsets: copyNumbers(region.offsets), sizes: copyNumbers(region.sizes) };
}

/** A fresh copy of `dep`. */
export function cloneDependency(dep: Dependency): Dependency {
  return dep.kind === "op"
    ? { kind: "op", rank: dep.rank, stream: dep.stream, index: dep.index }
    : { kind: "compute", rank: dep.rank, region: cloneRegion(dep.region) };
}

/** A fresh copy of a dependency list (a literal for the usual zero or one entries; see {@link copyNumbers}). */
export function cloneDependencies(deps: readonly Dependency[]): Dependency[] {
  if (deps.length === 0) return [];
  if (deps.length === 1) return [cloneDependency(deps[0]!)];
  return deps.map(cloneDependency);
}

const P2P_KEYS = ["kind", "side", "peer", "src", "dst", "reduce", "deps", "label"] as const;
const LOCAL_COPY_KEYS = ["kind", "src", "dst", "reduce", "deps", "label"] as const;

/** True when the own keys of `op` appear in `order` (a subsequence of it, in that order). */
function keysFollow(op: object, order: readonly string[]): boolean {
  let i = 0;
  for (const k in op) {
    while (i < order.length && order[i] !== k) i++;
    if (i === order.length) return false;
    i++;
  }
  return true;
}

/**
 * A fresh copy of `op`, with `deps` replaced when given. Point-to-point ops and local
 * copies with the schema's keys in the schema's order (every op the library makes) are
 * copied by object literals, so that large plans are allocated where they will live (see
 * {@link copyNumbers}); any other op by a spread, which keeps its keys and their order.
 */
export function cloneOp(op: Op, deps?: Dependency[]): Op {
  const src = cloneRegion(op.src);
  const dst = cloneRegion(op.dst);
  const d = deps ?? cloneDependencies(op.deps);
  if (op.kind === "p2p" && keysFollow(op, P2P_KEYS)) {
    const { side, peer } = op;
    if (!("reduce" in op))
      return "label" in op
        ? { kind: "p2p", side, peer, src, dst, deps: d, label: op.label }
        : { kind: "p2p", side, peer, src, dst, deps: d };
    return "label" in op
      ? { kind: "p2p", side, peer, src, dst, reduce: op.reduce, deps: d, label: op.label }
      : { kind: "p2p", side, peer, src, dst, reduce: op.reduce, deps: d };
  }
  if (op.kind === "local-copy" && keysFollow(op, LOCAL_COPY_KEYS)) {
    if (!("reduce" in op))
      return "label" in op ? { kind: "local-copy", src, dst, deps: d, label: op.label } : { kind: "local-copy", src, dst, deps: d };
    return "label" in op
      ? { kind: "local-copy", src, dst, reduce: op.reduce, deps: d, label: op.label }
      : { kind: "local-copy", src, dst, reduce: op.reduce, deps: d };
  }
  const copy = { ...op, src, dst, deps: d };
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
