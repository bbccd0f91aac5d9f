// Reference copy (test oracle): the validator as it was before its per-op arrays, region
// interning and CSR rewrite, kept so a property test can check that the fast path reports
// exactly what this straightforward version reports. Not part of the package's surface.
// Flat, array-based index of a plan's ops: global op ids in (rank, stream, index) order,
// the stream (chain) each op sits on, and the matching of collective calls across ranks
// into one joint instance. Every later phase works on these ids.
import type { ChunkPlan, CollectiveOp, Op, Region } from "../../model/schema.js";
import { intersect } from "../../region/box.js";
import type { OpAddress } from "../errors.js";

/** The plan's ops as flat arrays. */
export interface PlanIndex {
  readonly plan: ChunkPlan;
  readonly world: number;
  /** Op per global id. */
  readonly ops: Op[];
  readonly opRank: Int32Array;
  readonly opStream: Int32Array;
  readonly opIndex: Int32Array;
  /** Global stream id per op (a chain: its ops run in order). */
  readonly opChain: Int32Array;
  /** `streamBase[rank][stream]` = global id of that stream's op 0. */
  readonly streamBase: number[][];
  /** Graph node per op: itself, or for a collective the first participant of its instance. */
  readonly nodeOf: Int32Array;
  /** Per collective instance (keyed by its node): participant op ids, by position in `ranks`. */
  readonly instances: Map<number, number[]>;
}

/** The address of a global op id. */
export function opRef(index: PlanIndex, id: number): OpAddress {
  return { rank: index.opRank[id] ?? -1, stream: index.opStream[id] ?? -1, index: index.opIndex[id] ?? -1 };
}

/** One collective call that found no partner, or whose partners disagree. */
export interface UnmatchedCollective {
  op: number;
  reason: string;
}

/**
 * Indexes a structurally valid plan. Collectives are matched the way a communicator
 * matches calls: the k-th call with a given (kind, ranks, axis) on each rank, in stream
 * then op order, form one instance.
 */
export function indexPlan(plan: ChunkPlan): { index: PlanIndex; unmatched: UnmatchedCollective[] } {
  const world = plan.mesh.shape.reduce((a, b) => a * b, 1);
  let total = 0;
  for (const rp of plan.ranks) for (const s of rp.streams) total += s.length;
  const ops: Op[] = new Array<Op>(total);
  const opRank = new Int32Array(total);
  const opStream = new Int32Array(total);
  const opIndexArr = new Int32Array(total);
  const opChain = new Int32Array(total);
  const nodeOf = new Int32Array(total);
  const streamBase: number[][] = [];
  let id = 0;
  let chain = 0;
  for (const rp of plan.ranks) {
    const bases: number[] = [];
    rp.streams.forEach((stream, s) => {
      bases.push(id);
      stream.forEach((op, i) => {
        ops[id] = op;
        opRank[id] = rp.rank;
        opStream[id] = s;
        opIndexArr[id] = i;
        opChain[id] = chain;
        nodeOf[id] = id;
        id++;
      });
      chain++;
    });
    streamBase.push(bases);
  }
  const instances = new Map<number, number[]>();
  const unmatched: UnmatchedCollective[] = [];
  const open = new Map<string, number[][]>();
  const seenPerRank = new Map<string, number>();
  for (let o = 0; o < total; o++) {
    const op = ops[o];
    if (op?.kind !== "collective") continue;
    const key = `${op.collective}|${op.ranks.join(",")}|${op.axis}`;
    const rankKey = `${opRank[o]}|${key}`;
    const k = seenPerRank.get(rankKey) ?? 0;
    seenPerRank.set(rankKey, k + 1);
    let calls = open.get(key);
    if (calls === undefined) open.set(key, (calls = []));
    let members = calls[k];
    if (members === undefined) calls[k] = members = new Array<number>(op.ranks.length).fill(-1);
    members[op.ranks.indexOf(opRank[o] ?? -1)] = o;
  }
  for (const calls of open.values()) {
    for (const members of calls) {
      const present = members.filter((m) => m >= 0);
      const first = present[0] ?? -1;
      const firstOp = ops[first] as CollectiveOp;
      if (present.length !== members.length) {
        const missing = firstOp.ranks.filter((_, i) => (members[i] ?? -1) < 0);
        for (const m of present) unmatched.push({ op: m, reason: `ranks ${missing.join(", ")} never make the matching call` });
        continue;
      }
      const disagree = present.find((m) => {
        const op = ops[m] as CollectiveOp;
        return (
          (op.reduce ?? "sum") !== (firstOp.reduce ?? "sum") ||
          op.src.sizes.join(",") !== firstOp.src.sizes.join(",") ||
          op.dst.sizes.join(",") !== firstOp.dst.sizes.join(",")
        );
      });
      if (disagree !== undefined) {
        unmatched.push({ op: disagree, reason: `its src/dst sizes or reduction differ from rank ${opRank[first]}'s matching call` });
        continue;
      }
      for (const m of present) nodeOf[m] = first;
      instances.set(first, members);
    }
  }
  return {
    index: { plan, world, ops, opRank, opStream, opIndex: opIndexArr, opChain, streamBase, nodeOf, instances },
    unmatched,
  };
}

/**
 * Where op `op` (listed on `rank`) reads its `src`, per the schema: push and local-copy
 * read on their own rank, pull on the peer; a collective participant reads its own `src`.
 * Every op reads exactly one region and writes exactly one.
 */
export function readRank(rank: number, op: Op): number {
  return op.kind === "p2p" && op.side === "pull" ? op.peer : rank;
}

/** Where op `op` (listed on `rank`) writes its `dst`: push writes on the peer, others here. */
export function writeRank(rank: number, op: Op): number {
  return op.kind === "p2p" && op.side === "push" ? op.peer : rank;
}

/** True when the op combines into its `dst` instead of overwriting it (a collective overwrites). */
export function reducesInto(op: Op): boolean {
  return op.kind !== "collective" && op.reduce !== undefined;
}

/** The part of `region` that op `o` writes on `rank` (for messages), or `region` itself. */
export function writtenPart(index: PlanIndex, o: number, rank: number, region: Region): Region {
  const op = index.ops[o];
  if (op === undefined || writeRank(index.opRank[o] ?? 0, op) !== rank) return region;
  return intersect(op.dst, region) ?? region;
}

/** Slab `j` of `n` equal slabs of `region` along `axis`. */
export function slab(region: Region, n: number, j: number, axis: number): Region {
  const size = Math.floor((region.sizes[axis] ?? 0) / n);
  const offsets = [...region.offsets];
  const sizes = [...region.sizes];
  offsets[axis] = (offsets[axis] ?? 0) + j * size;
  sizes[axis] = size;
  return { tensor: region.tensor, offsets, sizes };
}
