// What a plan's claim means, region by region (AutoOverlap §5.1's collectives): for each
// participating rank, which regions of the claimed tensor must end up holding which
// ranks' source regions, and whether they are reduced.
import type { Claim, Region, TensorDecl } from "../model/schema.js";
import { splitRegion } from "../region/box.js";

/** One region of the result on one rank and what it must hold. */
export interface ClaimTarget {
  /** The rank whose buffer is checked. */
  rank: number;
  /** Region of `claim.tensor` on that rank. */
  region: Region;
  /** The source regions (same shape) whose initial contents it must hold, one per contributor. */
  sources: readonly ClaimSource[];
  /** True when the sources are combined by `claim.reduce` (ReduceScatter, AllReduce). */
  reduce: boolean;
}

function whole(decl: TensorDecl): Region {
  return { tensor: decl.name, offsets: decl.shape.map(() => 0), sizes: [...decl.shape] };
}

function sameExtents(a: readonly number[], b: readonly number[], except = -1): boolean {
  return a.length === b.length && a.every((x, d) => d === except || x === b[d]);
}

/**
 * Visits one target: the fields of a {@link ClaimTarget}, passed apart so no object is built
 * per target, and `target`, a small id (0, 1, 2, ...) shared by the targets of all ranks
 * that check the same region against the same sources (AllGather's slab j on every rank),
 * for callers to cache per id in an array.
 */
export type ClaimVisitor = (rank: number, region: Region, sources: readonly ClaimSource[], reduce: boolean, target: number) => void;

/** The targets of a claim, visited one at a time (n² of them for AllGather and AllToAll). */
export type ClaimTargets = (visit: ClaimVisitor) => void;

/** One contributor to a target: a region of the source tensor on a rank. */
export interface ClaimSource {
  rank: number;
  region: Region;
}

/**
 * Resolves a claim into targets, or returns a message saying why its tensors cannot
 * carry it. `claim.src` defaults to `claim.tensor` (in place). Rank `ranks[j]`'s shard is
 * slab j of the balanced partition along `axis` (the first `extent % n` slabs one element
 * larger). Out of place, AllGather's source may be one shard (equal shards only) or the
 * full tensor; ReduceScatter's result may be one slab (equal slabs only) or the full
 * tensor, of which rank i's slab i is checked.
 */
export function claimTargets(claim: Claim, decls: ReadonlyMap<string, TensorDecl>, world: number): ClaimTargets | string {
  const out = decls.get(claim.tensor);
  if (out === undefined) return `claim names tensor ${claim.tensor}, which the plan does not declare`;
  const src = decls.get(claim.src ?? claim.tensor);
  if (src === undefined) return `claim names source tensor ${claim.src}, which the plan does not declare`;
  const ranks = claim.ranks;
  const n = ranks.length;
  if (new Set(ranks).size !== n) return `claim lists a rank twice in [${ranks.join(", ")}]`;
  const outside = ranks.find((r) => r >= world);
  if (outside !== undefined) return `claim names rank ${outside}, outside the mesh of ${world} ranks`;
  const axis = claim.axis;
  if (axis >= out.shape.length || axis >= src.shape.length) return `claim axis ${axis} does not exist on ${out.name} or ${src.name}`;
  if (out.dtype !== src.dtype) return `claim moves ${src.name} (${src.dtype}) into ${out.name} (${out.dtype}); dtypes must match`;
  if (!sameExtents(out.shape, src.shape, axis)) return `${src.name} and ${out.name} must agree on every axis but ${axis}`;
  const o = out.shape[axis] ?? 0;
  const s = src.shape[axis] ?? 0;
  const full = whole(out);
  const fullSrc = whole(src);
  // Shards follow the balanced partition (the first extent % n one element larger), as
  // splitRegion and the templates cut them.
  const slabs = o >= n ? splitRegion(full, n, axis) : [];
  const srcSlabs = s >= n ? splitRegion(fullSrc, n, axis) : [];
  switch (claim.collective) {
    case "all-gather": {
      if (o < n) return `all-gather claim: ${out.name} axis ${axis} (${o}) has fewer elements than the ${n} ranks`;
      const shardIsWhole = src.name !== out.name && o % n === 0 && s * n === o;
      if (src.name !== out.name && !shardIsWhole && s !== o) {
        return `all-gather claim: ${src.name} axis ${axis} must be ${o} (the full tensor)${o % n === 0 ? ` or ${o / n} (one shard)` : ""}`;
      }
      const sources = ranks.map((from, j) => [{ rank: from, region: shardIsWhole ? fullSrc : (srcSlabs[j] as Region) }]);
      return (visit) => {
        for (const rank of ranks) for (let j = 0; j < n; j++) visit(rank, slabs[j] as Region, sources[j] ?? [], false, j);
      };
    }
    case "reduce-scatter": {
      if (s < n) return `reduce-scatter claim: ${src.name} axis ${axis} (${s}) has fewer elements than the ${n} ranks`;
      const resultIsSlab = src.name !== out.name && s % n === 0 && o * n === s;
      if (!resultIsSlab && o !== s) {
        return `reduce-scatter claim: ${out.name} axis ${axis} must be ${s} (the full tensor)${s % n === 0 ? ` or ${s / n} (one slab)` : ""}`;
      }
      const sources = ranks.map((_, i) => ranks.map((from) => ({ rank: from, region: srcSlabs[i] as Region })));
      return (visit) => ranks.forEach((rank, i) => visit(rank, resultIsSlab ? full : (slabs[i] as Region), sources[i] ?? [], true, i));
    }
    case "all-reduce": {
      if (o !== s) return `all-reduce claim: ${src.name} and ${out.name} must have the same shape`;
      const sources = ranks.map((from) => ({ rank: from, region: fullSrc }));
      return (visit) => ranks.forEach((rank) => visit(rank, full, sources, true, 0));
    }
    case "all-to-all": {
      if (o !== s || o % n !== 0)
        return `all-to-all claim: ${src.name} and ${out.name} must have the same shape, divisible by ${n} on axis ${axis}`;
      return (visit) =>
        ranks.forEach((rank, i) =>
          ranks.forEach((from, j) => visit(rank, slabs[j] as Region, [{ rank: from, region: srcSlabs[i] as Region }], false, i * n + j)),
        );
    }
  }
}
