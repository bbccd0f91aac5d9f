// What every template shares: its options (tensor, sharded axis, mesh, split factor), their
// checks, the shard regions of each rank, and the assembly of per-rank op lists into a
// structurally checked plan that is then cut into chunks by `split`.
import type { ChunkPlan, Claim, DType, Mesh, Op, Reduction, Region, TensorDecl } from "../model/schema.js";
import { PlanBuilder } from "../plan/builder.js";
import { cloneRegion } from "../plan/clone.js";
import { checkInteger, PlanError } from "../plan/errors.js";
import { worldSize } from "../plan/mesh.js";
import { fullRegion, shardRegion } from "../plan/shard.js";
import { split as splitPlan } from "../plan/split.js";
import { checkPlanStructure } from "../plan/structure.js";

/** The tensor a template moves: every rank holds a buffer of this shape and dtype. */
export interface TensorSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/** Options every template takes. */
export interface TemplateOptions {
  /** The tensor the result lands in (for AllGather, also the one whose shards are gathered). */
  readonly tensor: TensorSpec;
  /** The sharded axis: rank r owns shard r of `world` balanced shards along it. */
  readonly axis: number;
  /** The device mesh (`{shape}` or its shape); the world size is the product of its levels. */
  readonly mesh: Mesh | readonly number[];
  /** Split factor: every transfer is cut into this many chunks (default 1). */
  readonly split?: number;
  /** The axis chunks are cut along (default `axis`). */
  readonly splitAxis?: number;
  /** The plan's name (each template has a descriptive default). */
  readonly name?: string;
}

/** Options of templates that reduce per-rank partial values held in a second tensor. */
export interface ReductionOptions extends TemplateOptions {
  /** Name of the tensor holding each rank's partial values (default `<tensor>_partial`). */
  readonly src?: string;
  /** How partial values combine (default `"sum"`). */
  readonly reduce?: Reduction;
}

/** Options after checking, with the facts templates derive from them. */
export interface TemplateContext {
  readonly mesh: Mesh;
  readonly world: number;
  readonly ranks: number[];
  readonly tensor: TensorDecl;
  readonly axis: number;
  readonly split: number;
  readonly splitAxis: number;
  /** Rank q's shard of `tensor` along `axis`. */
  readonly shard: (q: number) => Region;
}

/**
 * Checks the shared options: a mesh of positive sizes, an axis of the tensor, at least one
 * element per rank along it when the template shards it (`extent-too-small` otherwise), a
 * positive split factor.
 */
export function templateContext(o: TemplateOptions, sharded = true): TemplateContext {
  const mesh: Mesh = { shape: "shape" in o.mesh ? [...o.mesh.shape] : [...o.mesh] };
  const world = worldSize(mesh);
  const tensor: TensorDecl = { name: o.tensor.name, shape: [...o.tensor.shape], dtype: o.tensor.dtype };
  if (tensor.shape.length === 0 || tensor.shape.some((s) => !Number.isSafeInteger(s) || s < 1)) {
    throw new PlanError("invalid-option", `tensor ${tensor.name} needs a non-empty shape of positive integers`);
  }
  const dims = tensor.shape.length;
  for (const [what, a] of [
    ["axis", o.axis],
    ["splitAxis", o.splitAxis ?? o.axis],
  ] as const) {
    if (!Number.isSafeInteger(a) || a < 0 || a >= dims) {
      throw new PlanError("invalid-axis", `${what} ${a} is outside tensor ${tensor.name}, which has ${dims} dimensions`);
    }
  }
  const extent = tensor.shape[o.axis]!;
  if (sharded && extent < world) {
    throw new PlanError(
      "extent-too-small",
      `tensor ${tensor.name} has extent ${extent} along axis ${o.axis}, fewer than the ${world} ranks that each need a shard; shard another axis or use fewer ranks`,
    );
  }
  return {
    mesh,
    world,
    ranks: Array.from({ length: world }, (_, r) => r),
    tensor,
    axis: o.axis,
    split: checkInteger(o.split ?? 1, "split", 1),
    splitAxis: o.splitAxis ?? o.axis,
    shard: (q) => shardRegion(tensor, o.axis, world, q),
  };
}

/** The partial-values tensor of a reduction template: same shape and dtype as `tensor`. */
export function partialTensor(ctx: TemplateContext, o: ReductionOptions): TensorDecl {
  const name = o.src ?? `${ctx.tensor.name}_partial`;
  if (name === ctx.tensor.name) {
    throw new PlanError("duplicate-tensor", `src must name a tensor other than the result ${name}`);
  }
  return { name, shape: [...ctx.tensor.shape], dtype: ctx.tensor.dtype };
}

/** `region` moved from tensor `region.tensor` to the same box of tensor `name`. */
export function onTensor(region: Region, name: string): Region {
  return { tensor: name, offsets: [...region.offsets], sizes: [...region.sizes] };
}

/** A plan's parts as templates produce them: per rank, its local regions and streams. */
export interface PlanParts {
  readonly name: string;
  readonly tensors: readonly TensorDecl[];
  readonly claim: Claim;
  readonly local: (rank: number) => Region[];
  readonly streams: (rank: number) => Op[][];
  /**
   * True when every op `streams` returns is fresh, and each of its regions, number lists and
   * dependency lists is either its own (shared with no other op, not kept by the template)
   * or deeply frozen (`plan/frozen.ts`: then any number of ops may hold it, as no one can
   * change it): the ops then go into the plan as they are instead of being copied, so a
   * plan of 10^5–10^6 ops is allocated once.
   */
  readonly owned?: boolean;
}

/** Builds the plan (structure checked as the builder checks it), then cuts it into `ctx.split` chunks. */
export function assemble(ctx: TemplateContext, parts: PlanParts): ChunkPlan {
  const plan = parts.owned === true ? ownedPlan(ctx, parts) : builtPlan(ctx, parts);
  return ctx.split === 1 ? plan : splitPlan(plan, ctx.split, ctx.splitAxis);
}

/** The plan through {@link PlanBuilder}, which copies every op. */
function builtPlan(ctx: TemplateContext, parts: PlanParts): ChunkPlan {
  const b = new PlanBuilder({ name: parts.name, mesh: ctx.mesh });
  parts.tensors.forEach((t) => b.tensor(t));
  b.claim(parts.claim);
  for (const r of ctx.ranks) {
    parts.local(r).forEach((region) => b.local(r, region));
    parts.streams(r).forEach((ops, s) => ops.forEach((op) => b.add(r, s, op)));
  }
  return b.build();
}

/**
 * The plan {@link builtPlan} makes, holding the ops of `parts.streams` themselves (see
 * {@link PlanParts.owned}): the header through the builder, then the rank plans, checked
 * as `build` checks them.
 */
function ownedPlan(ctx: TemplateContext, parts: PlanParts): ChunkPlan {
  const b = new PlanBuilder({ name: parts.name, mesh: ctx.mesh });
  for (const t of parts.tensors) b.tensor(t);
  b.claim(parts.claim);
  const plan: ChunkPlan = { ...b.build(), ranks: [] };
  for (const r of ctx.ranks) {
    // As the builder makes them: streams up to the last one that holds an op.
    const streams = parts.streams(r);
    while (streams.length > 0 && streams[streams.length - 1]!.length === 0) streams.pop();
    plan.ranks.push({ rank: r, local: parts.local(r).map(cloneRegion), streams });
  }
  checkPlanStructure(plan);
  return plan;
}

/** The whole-tensor region of `tensor` as rank-local valid data. */
export function wholeTensor(tensor: TensorDecl): Region {
  return fullRegion(tensor);
}
