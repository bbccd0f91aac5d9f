// The partition IR (AutoOverlap §5.1, "partition-based IRs"): a tensor's sharding spec over
// a device mesh, one placement per mesh axis, and the region each rank holds under it.
import { type Mesh, meshCoords, partition, type Reduction, type Region, type TensorDecl, worldSize } from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";

/**
 * How a tensor lies along one mesh axis: `shard` cuts tensor dimension `dim` among the
 * axis's ranks, `replicate` gives every rank of the axis the same values, `partial` gives
 * each rank a partial value whose `reduce` over the axis is the tensor.
 */
export type Placement =
  | { readonly kind: "shard"; readonly dim: number }
  | { readonly kind: "replicate" }
  | { readonly kind: "partial"; readonly reduce?: Reduction };

/** A sharding spec: one {@link Placement} per mesh axis, outermost axis first. */
export type ShardingSpec = readonly Placement[];

/** `shard(dim)`: the placement that cuts tensor dimension `dim` along a mesh axis. */
export const shard = (dim: number): Placement => ({ kind: "shard", dim });
/** `replicate()`: every rank of the mesh axis holds the same values. */
export const replicate = (): Placement => ({ kind: "replicate" });
/** `partialSum()`: ranks of the mesh axis hold partial values to be reduced (default sum). */
export const partialSum = (reduce: Reduction = "sum"): Placement => ({ kind: "partial", reduce });

/** Normalises a mesh given as `{shape}` or its shape array. */
export function toMesh(mesh: Mesh | readonly number[]): Mesh {
  return { shape: "shape" in mesh ? [...mesh.shape] : [...mesh] };
}

/** Checks a spec against a tensor and mesh: one placement per mesh axis, dims in range. */
export function checkSpec(spec: ShardingSpec, tensor: TensorDecl, mesh: Mesh, what = "spec"): void {
  if (spec.length !== mesh.shape.length) {
    throw new FrontendError(
      "invalid-spec",
      `${what} of ${tensor.name} has ${spec.length} placements but the mesh has ${mesh.shape.length} axes; give one placement per mesh axis`,
    );
  }
  spec.forEach((p, a) => {
    if (p.kind === "shard" && (!Number.isSafeInteger(p.dim) || p.dim < 0 || p.dim >= tensor.shape.length)) {
      throw new FrontendError(
        "invalid-spec",
        `${what} of ${tensor.name} shards dimension ${p.dim} on mesh axis ${a}, but the tensor has ${tensor.shape.length} dimensions`,
      );
    }
  });
}

/**
 * The region of `tensor` rank `rank` holds under `spec`: shard placements cut their
 * dimension in mesh-axis order (outer axis first, balanced spans as `partition`), so two
 * axes sharding one dimension nest like a row-major rank index.
 */
export function rankRegion(tensor: TensorDecl, mesh: Mesh, spec: ShardingSpec, rank: number): Region {
  const coords = meshCoords(rank, mesh);
  const offsets = tensor.shape.map(() => 0);
  const sizes = [...tensor.shape];
  spec.forEach((p, a) => {
    if (p.kind !== "shard") return;
    const n = mesh.shape[a]!;
    if (sizes[p.dim]! < n) {
      throw new FrontendError(
        "invalid-spec",
        `dimension ${p.dim} of ${tensor.name} is too small (${sizes[p.dim]}) to shard over mesh axis ${a} of size ${n}; shard a larger dimension`,
      );
    }
    const span = partition(sizes[p.dim]!, n)[coords[a]!]!;
    offsets[p.dim] = offsets[p.dim]! + span.offset;
    sizes[p.dim] = span.size;
  });
  return { tensor: tensor.name, offsets, sizes };
}

/** The ranks that differ from `rank` only in the coordinates of mesh axes `axes` (itself included, in rank order). */
export function meshGroup(mesh: Mesh, rank: number, axes: readonly number[]): number[] {
  const mine = meshCoords(rank, mesh);
  const out: number[] = [];
  for (let q = 0; q < worldSize(mesh); q++) {
    const c = meshCoords(q, mesh);
    if (c.every((v, a) => axes.includes(a) || v === mine[a])) out.push(q);
  }
  return out;
}
