// The chunk-size knob (AutoOverlap §5.3 "split factor"): every transfer becomes `n` transfers
// over consecutive sub-regions along an axis, and dependencies are rewritten so chunk j of a
// dependent op waits only for chunk j of its dependency when their regions correspond.
import type { ChunkPlan, Dependency, Op, RankPlan } from "../model/schema.js";
import { type Access, opAccesses, sameAccessRegion } from "./access.js";
import { cloneDependency, cloneOp, clonePlanHeader, cloneRegion } from "./clone.js";
import { PlanError } from "./errors.js";
import { splitChunks } from "./shard.js";
import { checkPlanStructure } from "./structure.js";

/**
 * True when `op` can be cut along `axis`: point-to-point transfers and local copies always
 * can; a collective only when the cut keeps its slab structure (an all-reduce along any
 * axis, the others along an axis other than their collective `axis`).
 */
export function isSplittable(op: Op, axis: number): boolean {
  return op.kind !== "collective" || op.collective === "all-reduce" || op.axis !== axis;
}

/** The `n` pieces of `op` along `axis` (`[op]` when it is a collective kept whole). */
export function splitOp(op: Op, n: number, axis: number): Op[] {
  if (n === 1 || !isSplittable(op, axis)) return [op];
  if (op.src.sizes[axis] !== op.dst.sizes[axis]) {
    throw new PlanError(
      "shape-mismatch",
      `an op moves ${op.src.tensor} (extent ${op.src.sizes[axis]} on axis ${axis}) into ${op.dst.tensor} (extent ${op.dst.sizes[axis]}); split needs equal extents along the split axis`,
    );
  }
  const srcs = splitChunks(op.src, n, axis);
  const dsts = splitChunks(op.dst, n, axis);
  return srcs.map((src, j) => ({
    ...op,
    src,
    dst: dsts[j]!,
    deps: [],
    ...(op.label === undefined ? {} : { label: `${op.label} [${j + 1}/${n}]` }),
  }));
}

/**
 * True when chunk j of `d` (on `dRank`) touches exactly what chunk j of `e` (on `eRank`)
 * touches: some access of one names the same box of the same buffer as an access of the
 * other, and no two of their accesses overlap without being that same box.
 */
function chunksCorrespond(d: Op, dRank: number, e: Op, eRank: number): boolean {
  let equal = false;
  for (const a of opAccesses(d, dRank)) {
    for (const b of opAccesses(e, eRank)) {
      if (a.rank !== b.rank || a.region.tensor !== b.region.tensor) continue;
      if (sameAccessRegion(a, b)) equal = true;
      else if (overlaps(a, b)) return false;
    }
  }
  return equal;
}

function overlaps(a: Access, b: Access): boolean {
  return a.region.offsets.every((o, d) => {
    const p = b.region.offsets[d]!;
    return o < p + b.region.sizes[d]! && p < o + a.region.sizes[d]!;
  });
}

/**
 * Replaces every transfer of `plan` by `n` transfers over consecutive sub-regions along
 * `axis` (sizes per `partition`: ragged extents split exactly, the first pieces one element
 * larger). The pieces take the op's place in its stream, in order.
 *
 * Dependencies: piece j of a split op D that depended on a split op E waits for piece j of
 * E when their regions correspond (D reads exactly what E wrote, as when a ring forwards the
 * chunk it just received), which pipelines chunks through chains; otherwise it waits for
 * E's last piece, which by stream order means all of E. A compute dependency on the very
 * region piece j cuts is narrowed to piece j's region. Collectives that cannot be cut along
 * `axis` (see {@link isSplittable}) stay whole. `signals` describe op positions and are
 * dropped: plan them again after splitting.
 *
 * Throws `invalid-split` unless `n` is a positive integer, `invalid-axis` when an op's
 * regions lack `axis`, and `region-too-small` when a region's extent along `axis` is below `n`.
 */
export function split(plan: ChunkPlan, n: number, axis: number): ChunkPlan {
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new PlanError("invalid-split", `the split factor must be a positive integer, got ${n}`);
  }
  checkPlanStructure(plan);
  // Piece counts and positions first; the pieces themselves are made one op at a time.
  const counts: number[][][] = plan.ranks.map((rp) => rp.streams.map((ops) => ops.map((op) => (n > 1 && isSplittable(op, axis) ? n : 1))));
  const starts: number[][][] = counts.map((streams) =>
    streams.map((ops) => {
      let next = 0;
      return ops.map((count) => {
        const start = next;
        next += count;
        return start;
      });
    }),
  );

  const rewrite = (d: Op, dRank: number, piece: Op, dCount: number, j: number, dep: Dependency): Dependency => {
    if (dep.kind === "compute") {
      if (dCount === 1) return cloneDependency(dep);
      const cut = opAccesses(d, dRank).findIndex((a) => sameAccessRegion(a, { rank: dep.rank, region: dep.region, write: false }));
      if (cut < 0) return cloneDependency(dep);
      return { kind: "compute", rank: dep.rank, region: cloneRegion(cut === 0 ? piece.src : piece.dst) };
    }
    const e = plan.ranks[dep.rank]!.streams[dep.stream]![dep.index]!;
    const eCount = counts[dep.rank]![dep.stream]![dep.index]!;
    const start = starts[dep.rank]![dep.stream]![dep.index]!;
    const pairwise = eCount === dCount && dCount > 1 && chunksCorrespond(d, dRank, e, dep.rank);
    return { kind: "op", rank: dep.rank, stream: dep.stream, index: start + (pairwise ? j : eCount - 1) };
  };

  const ranks: RankPlan[] = plan.ranks.map((rp, r) => ({
    rank: rp.rank,
    local: rp.local.map(cloneRegion),
    streams: rp.streams.map((ops, s) =>
      ops.flatMap((op, i) => {
        if (counts[r]![s]![i] === 1)
          return [
            cloneOp(
              op,
              op.deps.map((dep) => rewrite(op, r, op, 1, 0, dep)),
            ),
          ];
        // Cut pieces own fresh regions already.
        const mine = splitOp(op, n, axis);
        return mine.map((piece, j) => {
          const deps = op.deps.map((dep) => rewrite(op, r, piece, n, j, dep));
          return { ...piece, ...(piece.kind === "collective" ? { ranks: [...piece.ranks] } : {}), deps } as Op;
        });
      }),
    ),
  }));
  return { ...clonePlanHeader(plan), ranks };
}
