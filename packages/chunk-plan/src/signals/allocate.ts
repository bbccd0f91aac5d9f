// Signal-slot allocation under DESIGN.md's epoch model: on each rank, one slot per
// destination chunk region that arrives there (chunk-ready, or transit when the rank
// forwards it), one per compute dependency (tile-done), and per op the slot it notifies.
import type { ChunkPlan, Op, Region, SignalRef, SignalSlot } from "../model/schema.js";
import { SignalError } from "./errors.js";
import { formatRegion } from "../region/index.js";
import { compareRegions, regionKey, regionsIntersect } from "./regions.js";

/** The position of an op in a plan: op `index` of stream `stream` on rank `rank`. */
export interface OpRef {
  readonly rank: number;
  readonly stream: number;
  readonly index: number;
}

/** Where an op's completion lands: the rank and region it writes. */
export interface OpArrival {
  readonly rank: number;
  readonly region: Region;
  readonly reduce: boolean;
}

/** The world size of a plan: the product of its mesh levels. */
export function worldSize(plan: ChunkPlan): number {
  return plan.mesh.shape.reduce((acc, s) => acc * s, 1);
}

/**
 * The region an op writes and the rank it lands on: a push lands on `peer`, a pull,
 * a local copy and a collective land on the rank that lists them.
 */
export function opArrival(op: Op, rank: number): OpArrival {
  if (op.kind === "p2p" && op.side === "push") {
    return { rank: op.peer, region: op.dst, reduce: op.reduce !== undefined };
  }
  // A collective's reduce is internal to it: on each rank it completes once.
  const reduce = op.kind !== "collective" && op.reduce !== undefined;
  return { rank, region: op.dst, reduce };
}

/** Visit every op of a plan with its position, ranks in list order, streams and ops in order. */
export function forEachOp(plan: ChunkPlan, visit: (op: Op, ref: OpRef) => void): void {
  for (const rankPlan of plan.ranks) {
    rankPlan.streams.forEach((stream, s) => {
      stream.forEach((op, i) => visit(op, { rank: rankPlan.rank, stream: s, index: i }));
    });
  }
}

interface ChunkSlotDraft {
  region: Region;
  writers: OpRef[];
  plainWriters: number;
}

/**
 * Fill `plan.signals` (returns a new plan; the input is not modified).
 *
 * Slots, per rank:
 * - `chunk-ready`: one per distinct destination region arriving at the rank (written by
 *   a pull on it, a push from a peer, a local copy, or a collective's `dst`);
 *   `arrivals` = the number of ops writing exactly that region (1 for a plain transfer,
 *   the number of contributors for a reduction into it).
 * - `transit`: the same, for an arriving region that the rank forwards (it is the
 *   source of a push from this rank, of a peer's pull from it, or of a collective):
 *   the forwarding op waits on it, and so does compute reading it.
 * - `tile-done`: one per distinct `{kind: "compute", rank, region}` dependency, on that
 *   rank. Its `arrivals` is 1 here, as the plan does not know the compute tiling;
 *   lowering against a tiling counts the tiles that notify it (`applyTileArrivals`).
 *
 * Numbering is deterministic and independent of op order: on each rank, chunk slots
 * (chunk-ready and transit) first, then tile-done slots; each group sorted by region
 * (tensor in declaration order, then offsets, then sizes, lexicographically).
 *
 * `notify[r][s][i]` (indexed by rank value, `r < world`) is the slot op `i` of stream `s`
 * on rank `r` adds 1 to when it completes (release add): the slot of the region it
 * writes, on the rank where that region lands (for a push, a slot on the peer).
 *
 * @throws {SignalError} `bad-rank`, `bad-peer`, `unknown-tensor`, `bad-region`, or
 *   `conflicting-writes` (a region written twice on one rank without `reduce`).
 */
export function planSignals(plan: ChunkPlan): ChunkPlan {
  const world = worldSize(plan);
  checkRanksAndRegions(plan, world);
  const tensorOrder = new Map(plan.tensors.map((t, i) => [t.name, i]));

  const chunks = Array.from({ length: world }, () => new Map<string, ChunkSlotDraft>());
  const computes = Array.from({ length: world }, () => new Map<string, Region>());
  forEachOp(plan, (op, ref) => {
    const arrival = opArrival(op, ref.rank);
    const byKey = chunks[arrival.rank];
    if (byKey === undefined) return;
    const key = regionKey(arrival.region);
    const draft = byKey.get(key) ?? { region: arrival.region, writers: [], plainWriters: 0 };
    draft.writers.push(ref);
    if (!arrival.reduce) draft.plainWriters++;
    if (draft.plainWriters > 1) {
      throw new SignalError(
        "conflicting-writes",
        `region ${formatRegion(arrival.region)} on rank ${arrival.rank} is written by more than one op without reduce ` +
          `(last: rank ${ref.rank} stream ${ref.stream} op ${ref.index}); one slot cannot tell the ` +
          `writes apart: give each write its own region, or mark the later ones with reduce`,
      );
    }
    byKey.set(key, draft);
    for (let k = 0; k < op.deps.length; k++) {
      const dep = op.deps[k]!;
      if (dep.kind === "compute") computes[dep.rank]?.set(regionKey(dep.region), dep.region);
    }
  });

  const forwarded = forwardedSources(plan, world).map((reads) => new ReadIndex(reads));
  const slotByKey = Array.from({ length: world }, () => new Map<string, number>());
  const slots = chunks.map((byKey, rank) => {
    const chunkDrafts = [...byKey.values()].sort((a, b) => compareRegions(a.region, b.region, tensorOrder));
    const tileDone = [...(computes[rank]?.values() ?? [])].sort((a, b) => compareRegions(a, b, tensorOrder));
    const out: SignalSlot[] = [];
    for (const draft of chunkDrafts) {
      const isTransit =
        forwarded[rank]?.some(
          draft.region,
          (read) => regionsIntersect(read.region, draft.region) && !draft.writers.some((w) => sameOp(w, read.ref)),
        ) ?? false;
      slotByKey[rank]?.set(regionKey(draft.region), out.length);
      out.push({
        slot: out.length,
        arrivals: draft.writers.length,
        purpose: isTransit ? "transit" : "chunk-ready",
        region: draft.region,
      });
    }
    for (const region of tileDone) {
      out.push({ slot: out.length, arrivals: 1, purpose: "tile-done", region });
    }
    return { rank, slots: out };
  });

  const notify: (SignalRef | null)[][][] = Array.from({ length: world }, () => []);
  for (const rankPlan of plan.ranks) {
    notify[rankPlan.rank] = rankPlan.streams.map((stream) =>
      stream.map((op) => {
        const arrival = opArrival(op, rankPlan.rank);
        const slot = slotByKey[arrival.rank]?.get(regionKey(arrival.region));
        return slot === undefined ? null : { rank: arrival.rank, slot };
      }),
    );
  }
  return { ...plan, signals: { slots, notify } };
}

/**
 * Per rank, the regions read there by ops that move data off that rank, with the op.
 * An op reading what it writes itself (an in-place collective) forwards nothing.
 */
function forwardedSources(plan: ChunkPlan, world: number): ForwardedRead[][] {
  const out = Array.from({ length: world }, (): ForwardedRead[] => []);
  forEachOp(plan, (op, ref) => {
    if (op.kind === "p2p") {
      out[op.side === "push" ? ref.rank : op.peer]?.push({ region: op.src, ref });
    } else if (op.kind === "collective" && op.ranks.length > 1) {
      out[ref.rank]?.push({ region: op.src, ref });
    }
  });
  return out;
}

interface ForwardedRead {
  region: Region;
  ref: OpRef;
}

/**
 * The forwarded reads of one rank, indexed by tensor and by their interval on axis 0
 * (sorted by start, with a running maximum of ends), so a chunk slot meets only the reads
 * that can overlap it instead of every read of the rank: with one read per peer per chunk,
 * testing all of them was quadratic in the world size.
 */
class ReadIndex {
  private readonly byTensor = new Map<string, { reads: ForwardedRead[]; starts: number[]; maxEnd: number[] }>();

  constructor(reads: readonly ForwardedRead[]) {
    const groups = new Map<string, ForwardedRead[]>();
    for (const read of reads) {
      let group = groups.get(read.region.tensor);
      if (group === undefined) groups.set(read.region.tensor, (group = []));
      group.push(read);
    }
    for (const [tensor, group] of groups) {
      group.sort((a, b) => start(a.region) - start(b.region));
      const maxEnd: number[] = [];
      let m = Number.NEGATIVE_INFINITY;
      for (const read of group) maxEnd.push((m = Math.max(m, end(read.region))));
      this.byTensor.set(tensor, { reads: group, starts: group.map((r) => start(r.region)), maxEnd });
    }
  }

  /** True when `test` holds for some read whose axis-0 interval overlaps `region`'s. */
  some(region: Region, test: (read: ForwardedRead) => boolean): boolean {
    const group = this.byTensor.get(region.tensor);
    if (group === undefined) return false;
    const lo = start(region);
    const hi = end(region);
    // Reads starting before `hi`, scanned downwards while some of them may still reach past `lo`.
    let k = lowerBoundStart(group.starts, hi) - 1;
    for (; k >= 0 && (group.maxEnd[k] ?? Number.NEGATIVE_INFINITY) > lo; k--) {
      const read = group.reads[k]!;
      if (end(read.region) > lo && test(read)) return true;
    }
    return false;
  }
}

function start(region: Region): number {
  return region.offsets[0] ?? 0;
}

function end(region: Region): number {
  return (region.offsets[0] ?? 0) + (region.sizes[0] ?? 0);
}

/** Index of the first start `>= point`. */
function lowerBoundStart(starts: readonly number[], point: number): number {
  let lo = 0;
  let hi = starts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((starts[mid] ?? 0) < point) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function sameOp(a: OpRef, b: OpRef): boolean {
  return a.rank === b.rank && a.stream === b.stream && a.index === b.index;
}

function checkRanksAndRegions(plan: ChunkPlan, world: number): void {
  const seen = new Set<number>();
  const tensors = new Map(plan.tensors.map((t) => [t.name, t]));
  const checkRegion = (region: Region, where: string): void => {
    const tensor = tensors.get(region.tensor);
    if (tensor === undefined) {
      throw new SignalError("unknown-tensor", `${where} names tensor "${region.tensor}", which the plan does not declare in "tensors"`);
    }
    const dims = tensor.shape.length;
    const fits =
      region.offsets.length === dims &&
      region.sizes.length === dims &&
      tensor.shape.every((extent, d) => (region.offsets[d] ?? 0) + (region.sizes[d] ?? 0) <= extent);
    if (!fits) {
      throw new SignalError(
        "bad-region",
        `${where}: region ${formatRegion(region)} does not fit tensor ${tensor.name} of shape ` +
          `[${tensor.shape.join(",")}] (one offset and size per axis, inside the shape)`,
      );
    }
  };
  for (const rankPlan of plan.ranks) {
    if (rankPlan.rank >= world || seen.has(rankPlan.rank)) {
      throw new SignalError("bad-rank", `rank ${rankPlan.rank} is listed twice or lies outside the mesh of ${world} ranks`);
    }
    seen.add(rankPlan.rank);
    rankPlan.local.forEach((r, i) => checkRegion(r, `rank ${rankPlan.rank} local[${i}]`));
  }
  forEachOp(plan, (op, ref) => {
    const where = `rank ${ref.rank} stream ${ref.stream} op ${ref.index}`;
    if (op.kind === "p2p" && (op.peer >= world || op.peer === ref.rank)) {
      throw new SignalError("bad-peer", `${where}: peer ${op.peer} must be another rank below ${world}`);
    }
    checkRegion(op.src, where);
    checkRegion(op.dst, where);
    for (let k = 0; k < op.deps.length; k++) {
      const dep = op.deps[k]!;
      if (dep.rank >= world) {
        throw new SignalError("bad-rank", `${where}: dependency on rank ${dep.rank}, outside the mesh of ${world}`);
      }
      if (dep.kind === "compute") checkRegion(dep.region, `${where} compute dependency`);
    }
  });
}
