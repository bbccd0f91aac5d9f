// AllReduce templates: the partitioned one (AutoOverlap Fig. 4d: ReduceScatter, then
// AllGather of the reduced shards) and DistFuse's tile-wise one, where each output tile is
// reduced as soon as the compute tiles writing it are done.
import type { ChunkPlan, Op, Region } from "../model/schema.js";
import { collective, computeDep, localCopy, opRef, pull } from "../plan/builder.js";
import { checkInteger, PlanError } from "../plan/errors.js";
import { ringAllGatherOps, swizzleAllGatherOps } from "./all-gather.js";
import { assemble, onTensor, partialTensor, type ReductionOptions, templateContext, wholeTensor } from "./common.js";
import { directReduceScatterOps, ringReduceScatterOps } from "./reduce-scatter.js";

/** Options of {@link allReducePartitioned}. */
export interface PartitionedAllReduceOptions extends ReductionOptions {
  /** The ReduceScatter phase: `"ring"` (default) or `"direct"`. */
  readonly reduceScatter?: "ring" | "direct";
  /** The AllGather phase: `"ring-push"` (default), `"ring-pull"` or `"swizzle"` (pull). */
  readonly allGather?: "ring-push" | "ring-pull" | "swizzle";
  /** As in the ReduceScatter templates: wait for the compute tiles writing each `src` shard. */
  readonly afterCompute?: boolean;
}

/**
 * Partitioned AllReduce: ReduceScatter of `src` into `tensor` (rank r ends with the reduced
 * shard r, see `reduceScatterRing` / `reduceScatterDirect`), then AllGather of the reduced
 * shards of `tensor` (see `allGatherRing` / `allGatherSwizzle`), in one stream per rank.
 * The reduce-scatter's last op on rank q (index `world - 1`) produces shard q: an
 * all-gather op reading shard q from rank q depends on it (on rank r itself, stream order
 * covers it). With `split = n`, chunk j of a gather waits only for chunk j of that op.
 *
 * Ops per rank: `(2 * world - 1) * split`.
 */
export function allReducePartitioned(o: PartitionedAllReduceOptions): ChunkPlan {
  const ctx = templateContext(o);
  const src = partialTensor(ctx, o);
  const reduce = o.reduce ?? "sum";
  const rs = o.reduceScatter ?? "ring";
  const ag = o.allGather ?? "ring-push";
  const W = ctx.world;
  const emitRs = rs === "ring" ? ringReduceScatterOps : directReduceScatterOps;
  const reduced = (q: number): Op["deps"] => [opRef(q, 0, W - 1)];
  const streams = (r: number): Op[][] => {
    const first = emitRs(ctx, src, r, reduce, o.afterCompute ?? false);
    let second: Op[];
    if (ag === "swizzle") {
      second = swizzleAllGatherOps(ctx, r, "pull", reduced);
    } else {
      second = ringAllGatherOps(ctx, r, ag === "ring-push" ? "push" : "pull", W);
      // A pull ring's first step reads rank r - 1's freshly reduced shard.
      if (ag === "ring-pull" && W > 1) second[0]!.deps.push(...reduced((r - 1 + W) % W));
    }
    return [[...first, ...second]];
  };
  return assemble(ctx, {
    name: o.name ?? `all-reduce-partitioned-${rs}-${ag}`,
    tensors: [ctx.tensor, src],
    claim: { collective: "all-reduce", tensor: ctx.tensor.name, src: src.name, axis: ctx.axis, ranks: ctx.ranks, reduce },
    local: () => [wholeTensor(src)],
    streams,
  });
}

/** Options of {@link allReduceTilewise}. */
export interface TilewiseAllReduceOptions extends Omit<ReductionOptions, "axis"> {
  /** The claim's axis (no shard is involved: every rank ends with the whole result); default 0. */
  readonly axis?: number;
  /** The compute kernel's output tile sizes, one per axis of `tensor` (edge tiles are smaller). */
  readonly tile: readonly number[];
  /**
   * `"collective"` (default): one all-reduce collective per tile, as DistFuse's tile-wise
   * library issues; `"p2p"`: per tile, a local copy of the own partial and a pull
   * (accumulating) from every peer.
   */
  readonly path?: "collective" | "p2p";
}

/** The tiles of `shape` under `tile` sizes, row-major, edge tiles clipped. */
export function tileRegions(tensor: string, shape: readonly number[], tile: readonly number[]): Region[] {
  let regions: { offsets: number[]; sizes: number[] }[] = [{ offsets: [], sizes: [] }];
  shape.forEach((extent, d) => {
    const size = tile[d]!;
    const next: typeof regions = [];
    for (const r of regions) {
      for (let o = 0; o < extent; o += size) {
        next.push({ offsets: [...r.offsets, o], sizes: [...r.sizes, Math.min(size, extent - o)] });
      }
    }
    regions = next;
  });
  return regions.map((r) => ({ tensor, ...r }));
}

/**
 * DistFuse's tile-wise AllReduce (DistFuse §3: "trigger communication immediately, rather
 * than waiting for the entire computation to finish"). `src` holds every rank's partial
 * output of a GEMM; for each output tile (row-major over `tile`), as soon as the compute
 * tiles writing it are done the tile is reduced across ranks into `tensor`:
 * - `"collective"`: one all-reduce of the `src` tile into the `tensor` tile, depending on
 *   `{kind: "compute", rank: r, region: tile}`;
 * - `"p2p"`: a local copy of rank r's own partial tile (after its compute event), then for
 *   i = 1 .. world-1 a pull of the tile from rank `(r + i) mod world`, accumulating, after
 *   that rank's compute event for the tile.
 * With `split = n` every op is cut into n chunks along `splitAxis` (default 0), each
 * waiting for the compute event of its own chunk.
 *
 * Ops per rank: `tiles * split` (collective) or `tiles * world * split` (p2p).
 */
export function allReduceTilewise(o: TilewiseAllReduceOptions): ChunkPlan {
  const axis = o.axis ?? 0;
  const ctx = templateContext({ ...o, axis, mesh: o.mesh, splitAxis: o.splitAxis ?? axis }, false);
  const src = partialTensor(ctx, { ...o, axis });
  const reduce = o.reduce ?? "sum";
  const path = o.path ?? "collective";
  if (o.tile.length !== ctx.tensor.shape.length) {
    throw new PlanError(
      "shape-mismatch",
      `tile [${o.tile.join(", ")}] has ${o.tile.length} sizes; tensor ${ctx.tensor.name} has ${ctx.tensor.shape.length} axes`,
    );
  }
  o.tile.forEach((t, d) => checkInteger(t, `tile size on axis ${d}`, 1));
  const tiles = tileRegions(ctx.tensor.name, ctx.tensor.shape, o.tile);
  const W = ctx.world;
  const streams = (r: number): Op[][] => [
    tiles.flatMap((tile, t) => {
      const part = onTensor(tile, src.name);
      if (path === "collective") {
        return [collective("all-reduce", ctx.ranks, axis, part, tile, { reduce, deps: [computeDep(r, part)], label: `tile ${t}` })];
      }
      const ops: Op[] = [localCopy(part, tile, { deps: [computeDep(r, part)], label: `tile ${t} own` })];
      for (let i = 1; i < W; i++) {
        const peer = (r + i) % W;
        ops.push(pull(peer, part, tile, { reduce, deps: [computeDep(peer, part)], label: `tile ${t} step ${i}` }));
      }
      return ops;
    }),
  ];
  return assemble(ctx, {
    name: o.name ?? `all-reduce-tilewise-${path}`,
    tensors: [ctx.tensor, src],
    claim: { collective: "all-reduce", tensor: ctx.tensor.name, src: src.name, axis, ranks: ctx.ranks, reduce },
    local: () => [wholeTensor(src)],
    streams,
  });
}
