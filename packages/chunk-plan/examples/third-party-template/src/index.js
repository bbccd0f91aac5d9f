// A bidirectional ring AllGather, written as a third-party template: an ordinary function
// that returns a ChunkPlan, built only from @ovl/chunk-plan's public API. Each shard is cut
// in two halves; one half travels clockwise and the other counter-clockwise, each ring on
// its own stream, so both directions of every link carry data at once.
import { opRef, PlanBuilder, push, shardRegion, split, splitChunks, worldSize } from "@ovl/chunk-plan";

/** @import { ChunkPlan, DType, Mesh } from "@ovl/chunk-plan" */

/**
 * @typedef {object} BidirectionalRingOptions
 * @property {{ name: string, shape: number[], dtype: DType }} tensor the tensor gathered in place
 * @property {number} axis the sharded axis: rank r owns shard r
 * @property {Mesh | number[]} mesh the device mesh; world = product of its shape
 * @property {number} [split] chunks per transfer (default 1), cut along `axis`
 */

/**
 * Bidirectional ring AllGather. Rank r's shard is cut into halves h0 and h1 along `axis`.
 * At step k = 1 .. world-1, on stream 0 rank r pushes h0 of shard `(r - k + 1) mod world`
 * to rank r + 1 (after rank r - 1's step k - 1 on stream 0); on stream 1 it pushes h1 of
 * shard `(r + k - 1) mod world` to rank r - 1 (after rank r + 1's step k - 1 on stream 1).
 * Ops per rank: `2 * (world - 1) * split`. Needs shards of at least `2 * split` elements
 * along `axis`.
 *
 * @param {BidirectionalRingOptions} o
 * @returns {ChunkPlan}
 */
export function allGatherBidirectionalRing(o) {
  const mesh = Array.isArray(o.mesh) ? { shape: o.mesh } : o.mesh;
  const world = worldSize(mesh);
  const b = new PlanBuilder({ name: "all-gather-bidirectional-ring", mesh });
  const tensor = b.tensor({ name: o.tensor.name, shape: o.tensor.shape, dtype: o.tensor.dtype });
  b.claim({ collective: "all-gather", tensor: tensor.name, axis: o.axis, ranks: [...Array(world).keys()] });
  /** @param {number} q @param {0 | 1} half */
  const halfOf = (q, half) => {
    const piece = splitChunks(shardRegion(tensor, o.axis, world, q), 2, o.axis)[half];
    if (piece === undefined) throw new Error("unreachable: splitChunks returns two halves");
    return piece;
  };
  for (let r = 0; r < world; r++) {
    b.local(r, shardRegion(tensor, o.axis, world, r));
    const next = (r + 1) % world;
    const prev = (r - 1 + world) % world;
    for (let k = 1; k < world; k++) {
      const cw = halfOf((r - k + 1 + world) % world, 0);
      b.add(r, 0, push(next, cw, cw, { deps: k > 1 ? [opRef(prev, 0, k - 2)] : [], label: `clockwise step ${k}` }));
      const ccw = halfOf((r + k - 1) % world, 1);
      b.add(r, 1, push(prev, ccw, ccw, { deps: k > 1 ? [opRef(next, 1, k - 2)] : [], label: `counter-clockwise step ${k}` }));
    }
  }
  const plan = b.build();
  // `split` pairs chunk j of each forward with chunk j of the step that delivered it.
  return (o.split ?? 1) > 1 ? split(plan, o.split ?? 1, o.axis) : plan;
}
