// What an op reads and writes, as (rank, region) pairs: the facts `split` uses to pair the
// chunks of dependent ops, and `assignStreams` uses to keep conflicting ops ordered.
import type { Op, Region } from "../model/schema.js";
import { regionsOverlap, sameRegion } from "./shard.js";

/** One buffer access of an op: `region` of the buffer on `rank`, read or written. */
export interface Access {
  readonly rank: number;
  readonly region: Region;
  readonly write: boolean;
}

/**
 * The accesses of `op` listed on `rank`: a push reads `src` here and writes `dst` on the
 * peer; a pull reads `src` on the peer and writes `dst` here; local copies and collectives
 * read `src` and write `dst` here (a collective's reads on other ranks are their own ops').
 */
export function opAccesses(op: Op, rank: number): [Access, Access] {
  if (op.kind === "p2p") {
    const srcRank = op.side === "push" ? rank : op.peer;
    const dstRank = op.side === "push" ? op.peer : rank;
    return [
      { rank: srcRank, region: op.src, write: false },
      { rank: dstRank, region: op.dst, write: true },
    ];
  }
  return [
    { rank, region: op.src, write: false },
    { rank, region: op.dst, write: true },
  ];
}

/** True when two accesses touch a common element of one buffer and at least one writes. */
export function accessesConflict(a: Access, b: Access): boolean {
  return (a.write || b.write) && a.rank === b.rank && regionsOverlap(a.region, b.region);
}

/** True when two accesses name exactly the same box of the same buffer. */
export function sameAccessRegion(a: Access, b: Access): boolean {
  return a.rank === b.rank && sameRegion(a.region, b.region);
}
