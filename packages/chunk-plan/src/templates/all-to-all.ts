// AllToAll as point-to-point pulls: rank r gathers slab r of every rank's `src` into its
// `tensor`, slab q holding what rank q sent, in the rank-rotated order of the swizzle.
import type { ChunkPlan, Op } from "../model/schema.js";
import { localCopy, pull } from "../plan/builder.js";
import { PlanError } from "../plan/errors.js";
import { assemble, onTensor, partialTensor, type TemplateOptions, templateContext, wholeTensor } from "./common.js";

/** Options of {@link allToAll}. */
export interface AllToAllOptions extends TemplateOptions {
  /** Name of the tensor holding what each rank sends (default `<tensor>_send`). */
  readonly src?: string;
}

/**
 * AllToAll along `axis` (the model's collective semantics: slab j of rank i's `src` goes to
 * slab i of rank j's `tensor`; slabs are the world-size equal parts of `axis`). Rank r
 * copies its own slab r of `src` into slab r of `tensor`, then at step i = 1 .. world-1
 * pulls slab r of `src` from rank `p = (r + i) mod world` into slab p of `tensor`. No
 * dependencies: every source is only read. With `split = n` each op is cut in n chunks.
 *
 * Ops per rank: `world * split`. Throws `indivisible` unless `world` divides the extent
 * along `axis` (slabs of an all-to-all must all have one size).
 */
export function allToAll(o: AllToAllOptions): ChunkPlan {
  const ctx = templateContext(o);
  const extent = ctx.tensor.shape[ctx.axis]!;
  if (extent % ctx.world !== 0) {
    throw new PlanError(
      "indivisible",
      `AllToAll needs equal slabs: extent ${extent} of ${ctx.tensor.name} along axis ${ctx.axis} is not a multiple of the ${ctx.world} ranks`,
    );
  }
  const src = partialTensor(ctx, { ...o, src: o.src ?? `${ctx.tensor.name}_send` });
  const W = ctx.world;
  const streams = (r: number): Op[][] => {
    const ops: Op[] = [localCopy(onTensor(ctx.shard(r), src.name), ctx.shard(r), { label: "own slab" })];
    for (let i = 1; i < W; i++) {
      const peer = (r + i) % W;
      ops.push(pull(peer, onTensor(ctx.shard(r), src.name), ctx.shard(peer), { label: `all-to-all step ${i}` }));
    }
    return [ops];
  };
  return assemble(ctx, {
    name: o.name ?? "all-to-all",
    tensors: [ctx.tensor, src],
    claim: { collective: "all-to-all", tensor: ctx.tensor.name, src: src.name, axis: ctx.axis, ranks: ctx.ranks },
    local: () => [wholeTensor(src)],
    streams,
  });
}
