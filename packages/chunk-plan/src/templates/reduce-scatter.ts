// ReduceScatter templates: the ring, which accumulates partial sums in place as they travel,
// and the direct one, where each rank reads its shard's partials from every peer. Partial
// values live in tensor `src` on every rank; rank r's result lands in shard r of `tensor`.
import type { ChunkPlan, Dependency, Op, Reduction, TensorDecl } from "../model/schema.js";
import { computeDep, localCopy, opRef, pull, push } from "../plan/builder.js";
import { assemble, onTensor, partialTensor, type ReductionOptions, type TemplateContext, templateContext, wholeTensor } from "./common.js";

/** Options of the ReduceScatter templates. */
export interface ReduceScatterOptions extends ReductionOptions {
  /**
   * When true, every op that reads or accumulates into a `src` shard also waits for the
   * compute tiles writing that shard on the rank holding it (GEMM + ReduceScatter overlap).
   */
  readonly afterCompute?: boolean;
}

/**
 * Ring ReduceScatter ops of rank r (stream 0): at step k = 1 .. world-1, push shard
 * `c = (r - k) mod world` of `src` to rank r + 1, accumulating into that rank's `src`
 * shard c; then a local copy of the fully reduced `src` shard r into `tensor` shard r.
 */
export function ringReduceScatterOps(ctx: TemplateContext, src: TensorDecl, r: number, reduce: Reduction, afterCompute: boolean): Op[] {
  const W = ctx.world;
  const prev = (r - 1 + W) % W;
  const next = (r + 1) % W;
  const ops: Op[] = [];
  for (let k = 1; k < W; k++) {
    const chunk = onTensor(ctx.shard((r - k + W) % W), src.name);
    const deps: Dependency[] = k > 1 ? [opRef(prev, 0, k - 2)] : [];
    // The receiver's own partial of the chunk must be written before a sum lands on it.
    if (afterCompute) deps.push(computeDep(r, chunk), computeDep(next, chunk));
    ops.push(push(next, chunk, chunk, { reduce, deps, label: `ring step ${k}` }));
  }
  const own = onTensor(ctx.shard(r), src.name);
  const deps: Dependency[] = W > 1 ? [opRef(prev, 0, W - 2)] : afterCompute ? [computeDep(r, own)] : [];
  ops.push(localCopy(own, ctx.shard(r), { deps, label: "reduced shard" }));
  return ops;
}

/**
 * Direct ReduceScatter ops of rank r (stream 0): copy its own partial of shard r into
 * `tensor` shard r, then for i = 1 .. world-1 pull shard r of `src` from rank
 * `(r + i) mod world`, accumulating into `tensor` shard r.
 */
export function directReduceScatterOps(ctx: TemplateContext, src: TensorDecl, r: number, reduce: Reduction, afterCompute: boolean): Op[] {
  const W = ctx.world;
  const own = onTensor(ctx.shard(r), src.name);
  const ops: Op[] = [localCopy(own, ctx.shard(r), { deps: afterCompute ? [computeDep(r, own)] : [], label: "own partial" })];
  for (let i = 1; i < W; i++) {
    const peer = (r + i) % W;
    const deps = afterCompute ? [computeDep(peer, own)] : [];
    ops.push(pull(peer, own, ctx.shard(r), { reduce, deps, label: `direct step ${i}` }));
  }
  return ops;
}

function reduceScatter(o: ReduceScatterOptions, algorithm: "ring" | "direct"): ChunkPlan {
  const ctx = templateContext(o);
  const src = partialTensor(ctx, o);
  const reduce = o.reduce ?? "sum";
  const emit = algorithm === "ring" ? ringReduceScatterOps : directReduceScatterOps;
  return assemble(ctx, {
    name: o.name ?? `reduce-scatter-${algorithm}`,
    tensors: [ctx.tensor, src],
    claim: {
      collective: "reduce-scatter",
      tensor: ctx.tensor.name,
      src: src.name,
      axis: ctx.axis,
      ranks: ctx.ranks,
      reduce,
    },
    local: () => [wholeTensor(src)],
    streams: (r) => [emit(ctx, src, r, reduce, o.afterCompute ?? false)],
  });
}

/**
 * Ring ReduceScatter. Every rank holds its partial values of the whole tensor in `src`.
 * At step k = 1 .. world-1, rank r pushes `src` shard `(r - k) mod world` to rank r + 1,
 * which accumulates (`reduce`) it into its own `src` shard, so `src` is the accumulation
 * buffer (its shards other than r's are overwritten with partial sums, as an in-place ring
 * does). Step k depends on step k - 1 of rank r - 1 (the op that accumulated what it
 * forwards). After world-1 steps shard r on rank r holds the reduction over all ranks; a
 * local copy (after rank r - 1's last push) writes it to `tensor` shard r.
 * With `split = n` chunk j of step k waits only for chunk j of step k - 1.
 *
 * Ops per rank: `world * split` (`world - 1` pushes and 1 local copy, each cut in `split`).
 */
export function reduceScatterRing(o: ReduceScatterOptions): ChunkPlan {
  return reduceScatter(o, "ring");
}

/**
 * Direct ReduceScatter. Rank r copies its partial of shard r (`src`) into `tensor` shard r,
 * then at step i = 1 .. world-1 pulls shard r of `src` from rank `(r + i) mod world`,
 * accumulating into `tensor` shard r. Accumulations into one region run in one stream, so
 * they never race; `src` is only read.
 *
 * Ops per rank: `world * split` (1 local copy and `world - 1` pulls, each cut in `split`).
 */
export function reduceScatterDirect(o: ReduceScatterOptions): ChunkPlan {
  return reduceScatter(o, "direct");
}
