// Broadcast inference (Mercury §4.2, Fig. 6: sharding a read buffer triggers "AllGather or
// Broadcast, depending on access and layout"): when a local loop walks the shards, every
// rank reads one owner's block per step, so the block is broadcast from its owner.
import type { Region } from "@ovl/chunk-plan";
import type { BufferDecl, Program } from "./ir.js";
import { dimVars } from "./ir.js";

/** A broadcast schedule: the local loop that steps through the blocks, and per rank and step the owner read. */
export interface BroadcastSteps {
  readonly loop: string;
  readonly extent: number;
  /** `owners[r][t]`: the rank whose block rank r reads at step t. */
  readonly owners: readonly (readonly number[])[];
}

function contains(outer: Region, inner: Region): boolean {
  return inner.offsets.every((o, d) => o >= outer.offsets[d]! && o + inner.sizes[d]! <= outer.offsets[d]! + outer.sizes[d]!);
}

/**
 * Finds a local, unshifted loop J (outermost first) reading a sharded dim of `b`, whose
 * extent is the number of ranks the dim is cut among, such that at each value of J every
 * rank reads inside a single rank's block. `box(r, extra)` is rank r's access box with
 * loop values `extra` fixed as well.
 */
export function broadcastSteps(
  p: Program,
  b: BufferDecl,
  held: readonly Region[],
  group: readonly (readonly number[])[],
  parts: (loop: string) => number,
  box: (rank: number, extra: Readonly<Record<string, number>>) => Region,
): BroadcastSteps | undefined {
  const shards = p.shards[b.name] ?? [];
  for (const j of p.loops) {
    if (j.parallel || j.shift) continue;
    const cuts = shards.filter((s) => dimVars(p, b.dims[s.dim]!).has(j.name) && parts(s.loop) === j.extent);
    if (cuts.length === 0) continue;
    const owners: number[][] = [];
    let ok = true;
    for (let r = 0; r < held.length && ok; r++) {
      const row: number[] = [];
      for (let t = 0; t < j.extent && ok; t++) {
        const need = box(r, { [j.name]: t });
        const q = group[r]!.find((x) => contains(held[x]!, need));
        if (q === undefined) ok = false;
        else row.push(q);
      }
      // Each step must read a different owner's block (one pass over the group).
      if (new Set(row).size !== row.length) ok = false;
      owners.push(row);
    }
    if (ok) return { loop: j.name, extent: j.extent, owners };
  }
  return undefined;
}
