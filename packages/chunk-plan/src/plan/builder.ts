// A builder for hand-written plans (AutoOverlap Listing 2's `DevicePlan`, for all ranks at
// once): declare tensors and local regions, append ops to a rank's stream and get back the
// `(rank, stream, index)` reference later ops name as their dependency.
import type { z } from "zod";
import {
  CHUNK_PLAN_SCHEMA,
  type ChunkPlan,
  type Claim,
  type CollectiveOp,
  type Dependency,
  type LocalCopyOp,
  type Mesh,
  type Op,
  type P2POp,
  type Region,
  type TensorDecl,
} from "../model/schema.js";
import { PlanError } from "./errors.js";
import { worldSize } from "./mesh.js";
import { cloneDependencies, cloneOp, cloneRegion } from "./clone.js";
import { checkPlanStructure } from "./structure.js";

/** A dependency on one op: what {@link PlanBuilder.add} returns. */
export type OpRef = Extract<Dependency, { kind: "op" }>;

/** An op as a caller writes it: `deps` may be left out (no dependency). */
export type OpInput = z.input<typeof Op>;

/** The reference `{kind: "op", rank, stream, index}` to an op. */
export function opRef(rank: number, stream: number, index: number): OpRef {
  return { kind: "op", rank, stream, index };
}

/** A dependency on the compute tiles that write `region` on `rank` (a per-tile compute event). */
export function computeDep(rank: number, region: Region): Dependency {
  return { kind: "compute", rank, region };
}

/** Options shared by the op constructors. */
export interface OpOptions {
  readonly reduce?: P2POp["reduce"];
  readonly deps?: readonly Dependency[];
  readonly label?: string;
}

function common(o: OpOptions): Pick<P2POp, "deps"> & Partial<Pick<P2POp, "reduce" | "label">> {
  return {
    ...(o.reduce === undefined ? {} : { reduce: o.reduce }),
    deps: [...(o.deps ?? [])],
    ...(o.label === undefined ? {} : { label: o.label }),
  };
}

/**
 * A p2p op with its keys in the order `common` gives them (kind, side, peer, src, dst,
 * reduce, deps, label), built without intermediate objects: templates make one per chunk.
 */
function p2p(side: P2POp["side"], peer: number, src: Region, dst: Region, o: OpOptions): P2POp {
  const deps = o.deps === undefined ? [] : o.deps.slice();
  if (o.reduce === undefined) {
    return o.label === undefined
      ? { kind: "p2p", side, peer, src, dst, deps }
      : { kind: "p2p", side, peer, src, dst, deps, label: o.label };
  }
  const op: P2POp = { kind: "p2p", side, peer, src, dst, reduce: o.reduce, deps };
  if (o.label !== undefined) op.label = o.label;
  return op;
}

/** A push listed on the source rank: reads `src` there and writes `dst` on `peer`. */
export function push(peer: number, src: Region, dst: Region, o: OpOptions = {}): P2POp {
  return p2p("push", peer, src, dst, o);
}

/** A pull listed on the destination rank: reads `src` on `peer` and writes `dst` here. */
export function pull(peer: number, src: Region, dst: Region, o: OpOptions = {}): P2POp {
  return p2p("pull", peer, src, dst, o);
}

/** A copy (or, with `reduce`, an accumulation) between two regions of one rank. */
export function localCopy(src: Region, dst: Region, o: OpOptions = {}): LocalCopyOp {
  return { kind: "local-copy", src, dst, ...common(o) };
}

/** A collective over `ranks` along `axis`, as this rank lists it (see the model's `CollectiveOp`). */
export function collective(
  kind: CollectiveOp["collective"],
  ranks: readonly number[],
  axis: number,
  src: Region,
  dst: Region,
  o: OpOptions = {},
): CollectiveOp {
  return { kind: "collective", collective: kind, ranks: [...ranks], axis, src, dst, ...common(o) };
}

interface RankDraft {
  local: Region[];
  streams: Op[][];
}

/**
 * Accumulates a {@link ChunkPlan}. Ops are appended per `(rank, stream)`; `add` returns the
 * op's reference, usable as a dependency by any later or earlier-declared op. `build`
 * checks the whole plan's structure and returns a fresh plain object.
 */
export class PlanBuilder {
  readonly name: string;
  readonly mesh: Mesh;
  readonly world: number;
  private readonly tensors = new Map<string, TensorDecl>();
  private readonly drafts: RankDraft[];
  private claimed: Claim | undefined;

  constructor(init: { readonly name: string; readonly mesh: Mesh | readonly number[] }) {
    this.name = init.name;
    this.mesh = "shape" in init.mesh ? { shape: [...init.mesh.shape] } : { shape: [...init.mesh] };
    this.world = worldSize(this.mesh);
    this.drafts = Array.from({ length: this.world }, () => ({ local: [], streams: [] }));
  }

  /** Declares a tensor every rank holds a buffer of; returns the declaration. */
  tensor(decl: TensorDecl): TensorDecl {
    if (this.tensors.has(decl.name)) {
      throw new PlanError("duplicate-tensor", `tensor ${decl.name} is declared twice; give each tensor one name`);
    }
    const copy: TensorDecl = { ...decl, shape: [...decl.shape] };
    if (decl.strides !== undefined) copy.strides = [...decl.strides];
    this.tensors.set(decl.name, copy);
    return copy;
  }

  /** Records the collective this plan claims to implement (proved by validation). */
  claim(claim: Claim): this {
    this.claimed = { ...claim, ranks: [...claim.ranks] };
    return this;
  }

  /** Marks `region` as valid on `rank` before the plan runs (its shard). */
  local(rank: number, region: Region): this {
    this.draft(rank).local.push(cloneRegion(region));
    return this;
  }

  /** Appends `op` to `stream` of `rank` (creating streams up to it) and returns its reference. */
  add(rank: number, stream: number, op: OpInput): OpRef {
    const draft = this.draft(rank);
    if (!Number.isSafeInteger(stream) || stream < 0) {
      throw new PlanError("invalid-option", `stream index must be an integer >= 0, got ${stream}`);
    }
    while (draft.streams.length <= stream) draft.streams.push([]);
    const ops = draft.streams[stream]!;
    // One copy, deps included (no intermediate `{...op, deps}` object).
    ops.push(cloneOp(op as Op, op.deps === undefined ? [] : cloneDependencies(op.deps)));
    return opRef(rank, stream, ops.length - 1);
  }

  /** Number of ops appended so far to `stream` of `rank` (the index the next one gets). */
  length(rank: number, stream: number): number {
    return this.draft(rank).streams[stream]?.length ?? 0;
  }

  /** The finished plan; throws a {@link PlanError} naming the first structural fault. */
  build(): ChunkPlan {
    const plan: ChunkPlan = {
      $schema: CHUNK_PLAN_SCHEMA,
      name: this.name,
      mesh: { shape: [...this.mesh.shape] },
      tensors: [...this.tensors.values()],
      ...(this.claimed === undefined ? {} : { claim: this.claimed }),
      // Ops were copied on `add` and are never changed after; fresh arrays suffice.
      ranks: this.drafts.map((d, rank) => ({ rank, local: [...d.local], streams: d.streams.map((ops) => [...ops]) })),
    };
    checkPlanStructure(plan);
    return plan;
  }

  private draft(rank: number): RankDraft {
    const draft = this.drafts[rank];
    if (!Number.isSafeInteger(rank) || draft === undefined) {
      throw new PlanError("invalid-rank", `rank ${rank} is outside the mesh (0 .. ${this.world - 1})`);
    }
    return draft;
  }
}
