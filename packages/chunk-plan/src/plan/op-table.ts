// The lengths of every rank's streams in two flat arrays, so that checking that a dependency
// names an op reads two numbers instead of walking into another rank's plan objects (the
// structure checks run over every dependency of plans of 10^5–10^6 ops).
import type { RankPlan } from "../model/schema.js";

/** Stream lengths of a plan's ranks: does `(rank, stream, index)` name an op? */
export class OpTable {
  /** `first[r]` = position of rank r's stream 0 in `lengths` (`ranks + 1` entries). */
  private readonly first: Int32Array;
  private readonly lengths: Int32Array;

  constructor(ranks: readonly RankPlan[]) {
    this.first = new Int32Array(ranks.length + 1);
    let streams = 0;
    ranks.forEach((rp, r) => {
      this.first[r] = streams;
      streams += rp.streams.length;
    });
    this.first[ranks.length] = streams;
    this.lengths = new Int32Array(streams);
    ranks.forEach((rp, r) => rp.streams.forEach((ops, s) => (this.lengths[this.first[r]! + s] = ops.length)));
  }

  /** True when rank `rank` (an index of the plan's ranks) has op `index` in stream `stream`. */
  has(rank: number, stream: number, index: number): boolean {
    if (!Number.isInteger(rank) || !Number.isInteger(stream) || !Number.isInteger(index)) return false;
    if (rank < 0 || rank + 1 >= this.first.length || stream < 0 || index < 0) return false;
    const at = this.first[rank]! + stream;
    return at < this.first[rank + 1]! && index < this.lengths[at]!;
  }
}
