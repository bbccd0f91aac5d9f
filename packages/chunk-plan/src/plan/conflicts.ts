// Which ops of one list conflict (touch a common element of one buffer, one of them
// writing), found by a sweep along the axis that best separates the regions, so plans of
// thousands of ops per stream are not compared pair by pair.
import type { Access } from "./access.js";

interface Entry {
  readonly op: number;
  readonly access: Access;
  readonly start: number;
  readonly end: number;
}

function overlapAllAxes(a: Access, b: Access): boolean {
  return a.region.offsets.every((o, d) => {
    const p = b.region.offsets[d]!;
    return o < p + b.region.sizes[d]! && p < o + a.region.sizes[d]!;
  });
}

/** The axis along which a group's regions have the most distinct offsets. */
function sweepAxis(group: readonly { access: Access }[]): number {
  const dims = group[0]?.access.region.offsets.length ?? 0;
  let best = 0;
  let bestCount = -1;
  for (let d = 0; d < dims; d++) {
    const count = new Set(group.map((g) => g.access.region.offsets[d])).size;
    if (count > bestCount) {
      best = d;
      bestCount = count;
    }
  }
  return best;
}

/**
 * For ops given by their accesses (`accesses[i]` = op i's), the pairs `[p, i]` with
 * `p < i` whose accesses conflict. Each pair is listed once.
 */
export function conflictingPairs(accesses: readonly (readonly Access[])[]): [number, number][] {
  const groups = new Map<string, { op: number; access: Access }[]>();
  accesses.forEach((list, op) =>
    list.forEach((access) => {
      const key = `${access.rank}|${access.region.tensor}|${access.region.offsets.length}`;
      let group = groups.get(key);
      if (group === undefined) groups.set(key, (group = []));
      group.push({ op, access });
    }),
  );
  const seen = new Set<number>();
  const pairs: [number, number][] = [];
  const n = accesses.length;
  for (const group of groups.values()) {
    const d = sweepAxis(group);
    const entries: Entry[] = group
      .map(({ op, access }) => {
        const start = access.region.offsets[d]!;
        return { op, access, start, end: start + access.region.sizes[d]! };
      })
      .sort((a, b) => a.start - b.start);
    let active: Entry[] = [];
    for (const e of entries) {
      active = active.filter((a) => a.end > e.start);
      for (const a of active) {
        if (a.op === e.op || !(a.access.write || e.access.write) || !overlapAllAxes(a.access, e.access)) continue;
        const p = Math.min(a.op, e.op);
        const i = Math.max(a.op, e.op);
        if (!seen.has(p * n + i)) {
          seen.add(p * n + i);
          pairs.push([p, i]);
        }
      }
      active.push(e);
    }
  }
  return pairs;
}
