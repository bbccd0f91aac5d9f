// Immutable plan parts that many ops may hold at once. A template plan of 10^5–10^6 ops moves
// a few thousand distinct chunks: when every op that moves a chunk holds the same frozen
// region (and the same frozen dependency list), the plan allocates one object per op instead
// of about ten, and its JSON is the same as with a copy per op. Frozen, so that no op can
// change what another op holds (an assignment throws a TypeError in strict code).
import type { Dependency, Region } from "../model/schema.js";

/** A frozen copy of a number list. */
function frozenNumbers(a: readonly number[]): number[] {
  return Object.freeze(a.slice()) as number[];
}

/**
 * A frozen copy of `region` (the region, its offsets and its sizes), with the keys in the
 * schema's order (`tensor`, `offsets`, `sizes`), as every other region of a plan.
 */
export function frozenRegion(region: Region): Region {
  return Object.freeze({ tensor: region.tensor, offsets: frozenNumbers(region.offsets), sizes: frozenNumbers(region.sizes) }) as Region;
}

/** A frozen copy of `dep` (and of its region, for a compute dependency), keys in the schema's order. */
export function frozenDependency(dep: Dependency): Dependency {
  return dep.kind === "op"
    ? (Object.freeze({ kind: "op", rank: dep.rank, stream: dep.stream, index: dep.index }) as Dependency)
    : (Object.freeze({ kind: "compute", rank: dep.rank, region: frozenRegion(dep.region) }) as Dependency);
}

/** A frozen copy of a dependency list and of every dependency in it. */
export function frozenDependencies(deps: readonly Dependency[]): Dependency[] {
  return deps.length === 0 ? NO_DEPENDENCIES : (Object.freeze(deps.map(frozenDependency)) as Dependency[]);
}

/** The frozen empty dependency list every op without dependencies may hold. */
export const NO_DEPENDENCIES: Dependency[] = Object.freeze([]) as unknown as Dependency[];

/** True when `value` and every object it holds (arrays and plain objects, recursively) is frozen. */
export function isDeeplyFrozen(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return true;
  if (!Object.isFrozen(value)) return false;
  return Object.values(value).every(isDeeplyFrozen);
}
