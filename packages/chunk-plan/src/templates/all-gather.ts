// One-level AllGather templates (AutoOverlap Fig. 4c and Listing 2): the ring, whose
// chained dependencies pipeline chunks around the ranks, and the rank-rotated ("swizzled")
// full mesh, where every rank reads each peer's shard directly.
import type { ChunkPlan, Op } from "../model/schema.js";
import { opRef, pull, push } from "../plan/builder.js";
import { assemble, type TemplateContext, templateContext, type TemplateOptions } from "./common.js";

/** Which side lists each transfer: the sender (`push`) or the receiver (`pull`). */
export type TransferSide = "push" | "pull";

/** Options of {@link allGatherRing}. */
export interface RingAllGatherOptions extends TemplateOptions {
  /** `"push"` (default): rank r sends to r + 1; `"pull"`: rank r reads from r - 1. */
  readonly side?: TransferSide;
}

/**
 * Ring AllGather ops of one rank into stream 0, op `k - 1` being ring step `k`. Exposed for
 * composite templates (AllReduce), which place them after `base` earlier ops.
 */
export function ringAllGatherOps(ctx: TemplateContext, r: number, side: TransferSide, base: number): Op[] {
  const W = ctx.world;
  const prev = (r - 1 + W) % W;
  return Array.from({ length: W - 1 }, (_, s) => {
    const k = s + 1;
    const deps = k > 1 ? [opRef(prev, 0, base + k - 2)] : [];
    const label = `ring step ${k}`;
    if (side === "push") {
      const chunk = ctx.shard((r - k + 1 + W) % W);
      return push((r + 1) % W, chunk, chunk, { deps, label });
    }
    const chunk = ctx.shard((r - k + W) % W);
    return pull(prev, chunk, chunk, { deps, label });
  });
}

/**
 * Ring AllGather. Rank r starts with its shard (`local`). At ring step k = 1 .. world-1:
 * - push: rank r sends shard `(r - k + 1) mod world` to rank `r + 1`, i.e. its own shard at
 *   step 1 and, after that, the shard it received at step k - 1;
 * - pull: rank r reads shard `(r - k) mod world` from rank `r - 1`, the shard that rank
 *   itself read at step k - 1 (its own shard at step 1).
 * Step k on rank r depends on step k - 1 on rank r - 1 (the op that delivered the chunk it
 * forwards). With `split = n` every step is cut into n chunks along `splitAxis` and chunk j
 * of step k waits only for chunk j of step k - 1, so chunks pipeline around the ring.
 *
 * Ops per rank: `(world - 1) * split`, all on stream 0.
 */
export function allGatherRing(o: RingAllGatherOptions): ChunkPlan {
  const ctx = templateContext(o);
  const side = o.side ?? "push";
  return assemble(ctx, {
    name: o.name ?? `all-gather-ring-${side}`,
    tensors: [ctx.tensor],
    claim: { collective: "all-gather", tensor: ctx.tensor.name, axis: ctx.axis, ranks: ctx.ranks },
    local: (r) => [ctx.shard(r)],
    streams: (r) => [ringAllGatherOps(ctx, r, side, 0)],
  });
}

/** Options of {@link allGatherSwizzle}. */
export interface SwizzleAllGatherOptions extends TemplateOptions {
  /** `"pull"` (default, Listing 2) or `"push"`. */
  readonly side?: TransferSide;
}

/**
 * Swizzled full-mesh AllGather ops of one rank, step i at position i - 1; `deps(peer)` adds
 * the dependencies a read of `peer`'s shard needs (for composites whose shards are
 * produced by an earlier phase).
 */
export function swizzleAllGatherOps(
  ctx: TemplateContext,
  r: number,
  side: TransferSide,
  deps: (peer: number) => Op["deps"] = () => [],
): Op[] {
  const W = ctx.world;
  return Array.from({ length: W - 1 }, (_, s) => {
    const i = s + 1;
    const label = `swizzle step ${i}`;
    if (side === "pull") {
      const peer = (r + i) % W;
      return pull(peer, ctx.shard(peer), ctx.shard(peer), { deps: deps(peer), label });
    }
    const peer = (r - i + W) % W;
    return push(peer, ctx.shard(r), ctx.shard(r), { deps: deps(r), label });
  });
}

/**
 * 1-D swizzled full-mesh AllGather (AutoOverlap Listing 2). Rank r's own shard is in place
 * before the plan runs (`local`), so a consumer visits it first. Then, rank-rotated so that
 * no peer is read by everyone at once, step i = 1 .. world-1:
 * - pull: rank r reads shard `(r + i) mod world` from that rank;
 * - push: rank r writes its shard to rank `(r - i) mod world` (which thus receives shard
 *   `receiver + i` at step i, the same order as pull).
 * Transfers are independent (no dependencies). With `split = n` each is cut into n chunks.
 *
 * Ops per rank: `(world - 1) * split`, all on stream 0.
 */
export function allGatherSwizzle(o: SwizzleAllGatherOptions): ChunkPlan {
  const ctx = templateContext(o);
  const side = o.side ?? "pull";
  return assemble(ctx, {
    name: o.name ?? `all-gather-swizzle-${side}`,
    tensors: [ctx.tensor],
    claim: { collective: "all-gather", tensor: ctx.tensor.name, axis: ctx.axis, ranks: ctx.ranks },
    local: (r) => [ctx.shard(r)],
    streams: (r) => [swizzleAllGatherOps(ctx, r, side)],
  });
}
