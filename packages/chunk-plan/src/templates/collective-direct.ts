// The "direct" path of AutoOverlap §5.1: a collective inserted into the plan as one
// `collective` op per rank, realised later by a backend's own implementation.
import type { ChunkPlan, CollectiveKind, Op, Reduction } from "../model/schema.js";
import { collective } from "../plan/builder.js";
import { PlanError } from "../plan/errors.js";
import { assemble, partialTensor, type TemplateOptions, templateContext, wholeTensor } from "./common.js";

/** Options of {@link collectiveDirect}. */
export interface CollectiveDirectOptions extends Omit<TemplateOptions, "split" | "splitAxis"> {
  /** The collective to insert. */
  readonly collective: CollectiveKind;
  /** Name of the input tensor of reductions and all-to-all (default `<tensor>_partial`, `<tensor>_send`). */
  readonly src?: string;
  /** How reductions combine (default `"sum"`; ignored by all-gather and all-to-all). */
  readonly reduce?: Reduction;
}

/**
 * One `collective` op per rank over all ranks along `axis` (stream 0), with the regions the
 * model's `CollectiveOp` semantics require of rank r:
 * - all-gather: `src` = shard r of `tensor` (its `local`), `dst` = all of `tensor`;
 * - reduce-scatter: `src` = all of `src`, `dst` = shard r of `tensor`;
 * - all-reduce: `src` = all of `src`, `dst` = all of `tensor`;
 * - all-to-all: `src` = all of `src`, `dst` = all of `tensor`.
 * The claim is that collective. Ops per rank: 1. Throws `indivisible` unless `world`
 * divides the extent along `axis` (slabs of one size), except for all-reduce.
 */
export function collectiveDirect(o: CollectiveDirectOptions): ChunkPlan {
  const kind = o.collective;
  const ctx = templateContext({ ...o, split: 1 }, kind !== "all-reduce");
  const extent = ctx.tensor.shape[ctx.axis]!;
  if (kind !== "all-reduce" && extent % ctx.world !== 0) {
    throw new PlanError(
      "indivisible",
      `a direct ${kind} needs equal slabs: extent ${extent} of ${ctx.tensor.name} along axis ${ctx.axis} is not a multiple of the ${ctx.world} ranks`,
    );
  }
  const reduce = kind === "reduce-scatter" || kind === "all-reduce" ? (o.reduce ?? "sum") : undefined;
  const src =
    kind === "all-gather"
      ? undefined
      : partialTensor(ctx, { ...o, src: o.src ?? `${ctx.tensor.name}_${kind === "all-to-all" ? "send" : "partial"}` });
  const op = (r: number): Op => {
    const opts = { label: kind, ...(reduce === undefined ? {} : { reduce }) };
    if (src === undefined) return collective(kind, ctx.ranks, ctx.axis, ctx.shard(r), wholeTensor(ctx.tensor), opts);
    const dst = kind === "reduce-scatter" ? ctx.shard(r) : wholeTensor(ctx.tensor);
    return collective(kind, ctx.ranks, ctx.axis, wholeTensor(src), dst, opts);
  };
  return assemble(ctx, {
    name: o.name ?? `${kind}-direct`,
    tensors: src === undefined ? [ctx.tensor] : [ctx.tensor, src],
    claim: {
      collective: kind,
      tensor: ctx.tensor.name,
      ...(src === undefined ? {} : { src: src.name }),
      axis: ctx.axis,
      ranks: ctx.ranks,
      ...(reduce === undefined ? {} : { reduce }),
    },
    local: (r) => [src === undefined ? ctx.shard(r) : wholeTensor(src)],
    streams: (r) => [[op(r)]],
  });
}
