// Partition IR → chunk plan by the three paths of AutoOverlap Listing 3: "direct" (the
// collective as one op), "template" (a P2P template), "synth" (a greedy full-mesh P2P
// schedule that moves each missing region from an owner, balancing senders).
import {
  allGatherHierarchical,
  allGatherRing,
  allGatherSwizzle,
  allReducePartitioned,
  type ChunkPlan,
  type Claim,
  collectiveDirect,
  intersect,
  localCopy,
  type Mesh,
  meshRanks,
  PlanBuilder,
  pull,
  reduceScatterDirect,
  reduceScatterRing,
  type Reduction,
  type Region,
  regionVolume,
  subtract,
  type TensorDecl,
  worldSize,
} from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";
import { inferCollective, type ImpliedCollective } from "./infer.js";
import { meshGroup, rankRegion, type ShardingSpec, toMesh } from "./spec.js";

/** The lowering paths of AutoOverlap Listing 3. */
export type LoweringPath = "direct" | "template" | "synth";

/** Options of {@link lowerReshard}. */
export interface ReshardOptions {
  /** The global tensor (the result lands in a buffer of this name on every rank). */
  readonly tensor: TensorDecl;
  readonly mesh: Mesh | readonly number[];
  readonly before: ShardingSpec;
  readonly after: ShardingSpec;
  /** Default `"template"`. */
  readonly path?: LoweringPath;
  /**
   * Template choice: all-gather `"ring"` (default on a 1-level mesh), `"swizzle"`,
   * `"hierarchical"` (default on a 2-level mesh); reduce-scatter `"ring"` (default) or
   * `"direct"`; all-reduce is always the partitioned one.
   */
  readonly template?: "ring" | "swizzle" | "hierarchical" | "direct";
  /** Chunks per transfer for templates (default 1). */
  readonly split?: number;
}

/** A lowered reshard: the implied collective and the plan realising it. */
export interface LoweredReshard {
  readonly implied: ImpliedCollective;
  readonly path: LoweringPath;
  readonly plan: ChunkPlan;
}

/** Name of the buffer holding each rank's partial values before a reduction. */
export const partialName = (tensor: string): string => `${tensor}_partial`;

/**
 * Lowers the reshard of `tensor` from `before` to `after` into a chunk plan. `direct` and
 * `template` need the collective to span the whole mesh along one tensor dimension with
 * the world dividing its extent (the templates' contract); `synth` handles any reshard the
 * partition IR can state, including all-to-all and changes on a sub-mesh.
 */
export function lowerReshard(o: ReshardOptions): LoweredReshard {
  const mesh = toMesh(o.mesh);
  const implied = inferCollective(o.tensor, mesh, o.before, o.after);
  const path = o.path ?? "template";
  const plan = path === "synth" ? synthesize(o.tensor, mesh, o.before, o.after, implied) : viaCollective(o, mesh, implied, path);
  return { implied, path, plan };
}

function uniformDim(spec: ShardingSpec): number | undefined {
  const first = spec[0];
  if (first?.kind !== "shard") return undefined;
  return spec.every((p) => p.kind === "shard" && p.dim === first.dim) ? first.dim : undefined;
}

function viaCollective(o: ReshardOptions, mesh: Mesh, implied: ImpliedCollective, path: LoweringPath): ChunkPlan {
  const world = worldSize(mesh);
  const whole = implied.meshAxes.length === mesh.shape.length;
  const refuse = (why: string): never => {
    throw new FrontendError("unsupported-path", `path "${path}" cannot lower this reshard of ${o.tensor.name}: ${why}; use path "synth"`);
  };
  if (!whole) refuse("the change does not span every mesh axis");
  const kind = implied.kind;
  if (kind !== "all-gather" && kind !== "reduce-scatter" && kind !== "all-reduce") {
    return refuse(`${kind} has no ${path} lowering whose semantics match the partition IR`);
  }
  const dim = kind === "all-gather" ? uniformDim(o.before) : kind === "reduce-scatter" ? uniformDim(o.after) : 0;
  const uniform = kind === "all-reduce" ? o.before.every((p) => p.kind === "partial") : dim !== undefined;
  if (!uniform || dim === undefined) return refuse("every mesh axis must make the same change along one dimension");
  if (kind !== "all-reduce" && o.tensor.shape[dim]! % world !== 0)
    return refuse(`extent ${o.tensor.shape[dim]} is not a multiple of ${world} ranks`);
  const base = { tensor: o.tensor, axis: dim, mesh, split: o.split ?? 1 };
  const reduce: Reduction = implied.reduce ?? "sum";
  const src = partialName(o.tensor.name);
  if (path === "direct") {
    return collectiveDirect({ tensor: o.tensor, axis: dim, mesh, collective: kind, ...(kind === "all-gather" ? {} : { src, reduce }) });
  }
  if (kind === "all-gather") {
    const t = o.template ?? (mesh.shape.length === 2 ? "hierarchical" : "ring");
    if (t === "hierarchical") return allGatherHierarchical(base);
    if (t === "swizzle") return allGatherSwizzle(base);
    return allGatherRing(base);
  }
  if (kind === "reduce-scatter") {
    return o.template === "direct" ? reduceScatterDirect({ ...base, src, reduce }) : reduceScatterRing({ ...base, src, reduce });
  }
  return allReducePartitioned({ ...base, src, reduce });
}

/** Greedy P2P synthesis (the "synth" path): see docs/frontends.md for the rules. */
function synthesize(tensor: TensorDecl, mesh: Mesh, before: ShardingSpec, after: ShardingSpec, implied: ImpliedCollective): ChunkPlan {
  const ranks = meshRanks(mesh);
  const b = new PlanBuilder({ name: `reshard-${tensor.name}-synth`, mesh });
  b.tensor(tensor);
  const reducing = before.some((p) => p.kind === "partial");
  if (!reducing) {
    const held = ranks.map((r) => rankRegion(tensor, mesh, before, r));
    const load = ranks.map(() => 0);
    ranks.forEach((r) => b.local(r, held[r]!));
    for (const r of ranks) {
      let missing = subtract(rankRegion(tensor, mesh, after, r), held[r]!);
      for (const q of rotation(ranks, r)) {
        if (missing.length === 0) break;
        // Among ranks holding the same region as q, the least-loaded sends (ties: rotation order).
        const owners = rotation(ranks, r).filter((p) => sameBox(held[p]!, held[q]!));
        const sender = owners.reduce((best, p) => (load[p]! < load[best]! ? p : best), owners[0]!);
        const next: Region[] = [];
        for (const piece of missing) {
          const part = intersect(piece, held[q]!);
          if (part === undefined || sender === r) {
            next.push(piece);
            continue;
          }
          b.add(r, 0, pull(sender, part, part, { label: "synth" }));
          load[sender] = load[sender]! + regionVolume(part);
          next.push(...subtract(piece, held[q]!));
        }
        missing = next;
      }
    }
    const dim = uniformDim(before);
    if (
      implied.kind === "all-gather" &&
      dim !== undefined &&
      after.every((p) => p.kind === "replicate") &&
      tensor.shape[dim]! % ranks.length === 0
    ) {
      b.claim({ collective: "all-gather", tensor: tensor.name, axis: dim, ranks });
    }
    return b.build();
  }
  const partialAxes = before.flatMap((p, a) => (p.kind === "partial" ? [a] : []));
  before.forEach((p, a) => {
    if (
      p.kind !== "partial" &&
      (after[a]!.kind !== p.kind || (p.kind === "shard" && after[a]!.kind === "shard" && (after[a] as { dim: number }).dim !== p.dim))
    ) {
      throw new FrontendError(
        "unsupported-reshard",
        `synth reduces partial values and reshards other axes in one step; split it: first reduce on mesh axes ${partialAxes.join(", ")}, then reshard mesh axis ${a}`,
      );
    }
  });
  const srcDecl: TensorDecl = { ...tensor, name: partialName(tensor.name) };
  b.tensor(srcDecl);
  const reduce = implied.reduce ?? "sum";
  for (const r of ranks) {
    const src = rankRegion(srcDecl, mesh, before, r);
    b.local(r, src);
    const target = rankRegion(tensor, mesh, after, r);
    const from = { ...target, tensor: srcDecl.name };
    b.add(r, 0, localCopy(from, target, { label: "synth-own" }));
    for (const q of rotation(meshGroup(mesh, r, partialAxes), r)) {
      if (q !== r) b.add(r, 0, pull(q, from, target, { reduce, label: "synth-reduce" }));
    }
  }
  const world = partialAxes.length === mesh.shape.length;
  const dim = uniformDim(after);
  const claim: Claim | undefined = !world
    ? undefined
    : after.every((p) => p.kind === "replicate")
      ? { collective: "all-reduce", tensor: tensor.name, src: srcDecl.name, axis: 0, ranks, reduce }
      : dim !== undefined && tensor.shape[dim]! % ranks.length === 0
        ? { collective: "reduce-scatter", tensor: tensor.name, src: srcDecl.name, axis: dim, ranks, reduce }
        : undefined;
  if (claim !== undefined) b.claim(claim);
  return b.build();
}

/** `list` rotated to start after `r` (rank-rotated peers, so senders differ at each step). */
function rotation(list: readonly number[], r: number): number[] {
  const i = Math.max(0, list.indexOf(r));
  return [...list.slice(i + 1), ...list.slice(0, i + 1)];
}

function sameBox(a: Region, b: Region): boolean {
  return a.offsets.every((v, d) => v === b.offsets[d] && a.sizes[d] === b.sizes[d]);
}
