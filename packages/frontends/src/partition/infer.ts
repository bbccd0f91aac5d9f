// From two sharding specs of one tensor (before and after an operator boundary) to the
// collective they imply, per mesh axis: shard→replicate gathers, partial→shard scatters a
// reduction, partial→replicate all-reduces, shard(d1)→shard(d2) is an all-to-all.
import type { Mesh, Reduction, TensorDecl } from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";
import { checkSpec, type Placement, type ShardingSpec } from "./spec.js";

/** What a change of placement on one mesh axis implies. */
export type AxisTransition =
  | "none"
  | "all-gather"
  | "reduce-scatter"
  | "all-reduce"
  | "all-to-all"
  /** replicate → shard: every rank keeps a slice of what it holds; no communication. */
  | "slice";

/** The collective two specs imply (AutoOverlap §5.1: "the implied communication pattern between partitions"). */
export interface ImpliedCollective {
  /** One transition for every changed mesh axis; `mixed` when they differ. */
  readonly kind: AxisTransition | "mixed";
  /** The mesh axes whose placement changes, ascending. */
  readonly meshAxes: readonly number[];
  /** Per changed axis, its transition. */
  readonly perAxis: readonly AxisTransition[];
  /** The tensor dimension gathered or scattered (all-gather: `before`'s, scatter: `after`'s), when one. */
  readonly dim?: number;
  /** The reduction of partial values, for reduce-scatter and all-reduce. */
  readonly reduce?: Reduction;
}

function transition(before: Placement, after: Placement, axis: number): AxisTransition {
  const same = before.kind === after.kind && (before.kind !== "shard" || (after.kind === "shard" && before.dim === after.dim));
  if (same) return "none";
  if (before.kind === "shard" && after.kind === "replicate") return "all-gather";
  if (before.kind === "shard" && after.kind === "shard") return "all-to-all";
  if (before.kind === "partial" && after.kind === "shard") return "reduce-scatter";
  if (before.kind === "partial" && after.kind === "replicate") return "all-reduce";
  if (before.kind === "replicate" && after.kind === "shard") return "slice";
  throw new FrontendError(
    "unsupported-reshard",
    `mesh axis ${axis}: ${before.kind} → ${after.kind} implies no collective (values would have to be invented); produce partial values in the operator instead`,
  );
}

/** The collective implied by resharding `tensor` from `before` to `after` over `mesh`. */
export function inferCollective(tensor: TensorDecl, mesh: Mesh, before: ShardingSpec, after: ShardingSpec): ImpliedCollective {
  checkSpec(before, tensor, mesh, "before");
  checkSpec(after, tensor, mesh, "after");
  const meshAxes: number[] = [];
  const perAxis: AxisTransition[] = [];
  let dim: number | undefined;
  let reduce: Reduction | undefined;
  before.forEach((b, a) => {
    const aft = after[a]!;
    const t = transition(b, aft, a);
    if (t === "none") return;
    meshAxes.push(a);
    perAxis.push(t);
    if (t === "all-gather" && b.kind === "shard") dim ??= b.dim;
    if ((t === "reduce-scatter" || t === "all-to-all") && aft.kind === "shard") dim ??= aft.dim;
    if (b.kind === "partial") reduce ??= b.reduce ?? "sum";
  });
  const kinds = [...new Set(perAxis)];
  const kind = kinds.length === 0 ? "none" : kinds.length === 1 ? kinds[0]! : "mixed";
  return {
    kind,
    meshAxes,
    perAxis,
    ...(dim === undefined ? {} : { dim }),
    ...(reduce === undefined ? {} : { reduce }),
  };
}
