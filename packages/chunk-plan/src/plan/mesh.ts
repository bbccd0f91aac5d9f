// The device mesh as coordinates: world size, and the row-major correspondence between a
// rank and its coordinates (`[node, gpu]` for a 2-level mesh), as the model's `Mesh` defines.
import type { Mesh } from "../model/schema.js";
import { PlanError } from "./errors.js";

function checkMesh(mesh: Mesh): void {
  if (mesh.shape.length === 0 || mesh.shape.some((s) => !Number.isSafeInteger(s) || s < 1)) {
    throw new PlanError("invalid-mesh", `mesh.shape must be a non-empty list of positive integers, got [${mesh.shape.join(", ")}]`);
  }
}

/** Number of ranks of `mesh`: the product of its level sizes. */
export function worldSize(mesh: Mesh): number {
  checkMesh(mesh);
  const world = mesh.shape.reduce((a, b) => a * b, 1);
  if (!Number.isSafeInteger(world)) {
    throw new PlanError("invalid-mesh", `mesh [${mesh.shape.join(", ")}] has more ranks than a safe integer`);
  }
  return world;
}

/** The ranks `0 .. world - 1` of `mesh`, in order. */
export function meshRanks(mesh: Mesh): number[] {
  return Array.from({ length: worldSize(mesh) }, (_, r) => r);
}

/** Coordinates of `rank` in `mesh` (row-major, outermost level first): `[node, gpu]` on `[nodes, gpusPerNode]`. */
export function meshCoords(rank: number, mesh: Mesh): number[] {
  const world = worldSize(mesh);
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= world) {
    throw new PlanError("invalid-rank", `rank ${rank} is outside mesh [${mesh.shape.join(", ")}] (0 .. ${world - 1})`);
  }
  const coords = new Array<number>(mesh.shape.length);
  let rest = rank;
  for (let level = mesh.shape.length - 1; level >= 0; level--) {
    const size = mesh.shape[level]!;
    coords[level] = rest % size;
    rest = Math.floor(rest / size);
  }
  return coords;
}

/** The rank at `coords` in `mesh` (row-major); inverse of {@link meshCoords}. */
export function rankOf(coords: readonly number[], mesh: Mesh): number {
  checkMesh(mesh);
  if (coords.length !== mesh.shape.length) {
    throw new PlanError(
      "invalid-coords",
      `coordinates [${coords.join(", ")}] have ${coords.length} entries; mesh [${mesh.shape.join(", ")}] has ${mesh.shape.length} levels`,
    );
  }
  let rank = 0;
  coords.forEach((c, level) => {
    const size = mesh.shape[level]!;
    if (!Number.isSafeInteger(c) || c < 0 || c >= size) {
      throw new PlanError("invalid-coords", `coordinate ${c} at level ${level} is outside 0 .. ${size - 1}`);
    }
    rank = rank * size + c;
  });
  return rank;
}
