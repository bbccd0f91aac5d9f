// Flat, array-based index of a plan's ops: global op ids in (rank, stream, index) order,
// the stream (chain) each op sits on, and the matching of collective calls across ranks
// into one joint instance. Every later phase works on these ids.
import type { ChunkPlan, CollectiveOp, Op, Region } from "../model/schema.js";
import { intersect } from "../region/box.js";
import type { OpAddress } from "./errors.js";

/** The plan's ops as flat arrays. */
export interface PlanIndex {
  readonly plan: ChunkPlan;
  readonly world: number;
  /** Op per global id. */
  readonly ops: Op[];
  /**
   * Global stream id per op (a chain: its ops run in order). Ids are given in (rank, stream,
   * index) order, so a chain's ops have consecutive ids: op `o` is op `o - chainStart[c]` of
   * its stream, and two ops of one chain run in the order of their ids.
   */
  readonly opChain: Int32Array;
  /** Per chain: the global id of its op 0 (`chains + 1` entries, the last = number of ops). */
  readonly chainStart: Int32Array;
  /** Per chain: its rank and its stream index on that rank. */
  readonly chainRank: Int32Array;
  readonly chainStream: Int32Array;
  /** Graph node per op: itself, or for a collective the first participant of its instance. */
  readonly nodeOf: Int32Array;
  /** Per collective instance (keyed by its node): participant op ids, by position in `ranks`. */
  readonly instances: Map<number, number[]>;
  /** Rank each op reads its `src` on ({@link readRank}). */
  readonly readRank: Int32Array;
  /** Rank each op writes its `dst` on ({@link writeRank}). */
  readonly writeRank: Int32Array;
  /** 1 where the op combines into its `dst` ({@link reducesInto}). */
  readonly reduces: Uint8Array;
  /** 1 where the op is a collective call. */
  readonly collective: Uint8Array;
  /**
   * Op dependencies as global op ids, in each op's `deps` order (compute dependencies left
   * out): those of op `o` are `depOp[depStart[o] .. depStart[o + 1])`.
   */
  readonly depStart: Int32Array;
  readonly depOp: Int32Array;
}

function grow(a: Int32Array): Int32Array<ArrayBuffer> {
  const b = new Int32Array(a.length * 2);
  b.set(a);
  return b;
}

/** The address of a global op id. */
export function opRef(index: PlanIndex, id: number): OpAddress {
  const chain = index.opChain[id];
  if (chain === undefined) return { rank: -1, stream: -1, index: -1 };
  return { rank: index.chainRank[chain]!, stream: index.chainStream[chain]!, index: id - index.chainStart[chain]! };
}

/** The rank that lists op `id`. */
export function opRank(index: PlanIndex, id: number): number {
  return index.chainRank[index.opChain[id]!]!;
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
  // Per chain, not per op: an op's rank, stream and index follow from its chain and id. The
  // chains and the global id of each one's op 0 come from the stream lengths alone.
  const rankChain = new Int32Array(plan.ranks.length + 1);
  let chains = 0;
  plan.ranks.forEach((rp, r) => {
    rankChain[r] = chains;
    chains += rp.streams.length;
  });
  rankChain[plan.ranks.length] = chains;
  const chainStart = new Int32Array(chains + 1);
  const chainRank = new Int32Array(chains);
  const chainStream = new Int32Array(chains);
  let total = 0;
  plan.ranks.forEach((rp, r) => {
    rp.streams.forEach((ops, s) => {
      const c = rankChain[r]! + s;
      chainStart[c] = total;
      chainRank[c] = rp.rank;
      chainStream[c] = s;
      total += ops.length;
    });
  });
  chainStart[chains] = total;
  const ops: Op[] = new Array<Op>(total);
  const opChain = new Int32Array(total);
  const nodeOf = new Int32Array(total);
  const readRanks = new Int32Array(total);
  const writeRanks = new Int32Array(total);
  const reduces = new Uint8Array(total);
  const collective = new Uint8Array(total);
  const depStart = new Int32Array(total + 1);
  let depOp: Int32Array<ArrayBuffer> = new Int32Array(Math.max(16, total));
  let deps = 0;
  let id = 0;
  let chain = 0;
  // One pass over the op objects: every later phase reads these arrays instead.
  for (const rp of plan.ranks) {
    const rank = rp.rank;
    for (let s = 0; s < rp.streams.length; s++) {
      const stream = rp.streams[s]!;
      for (let i = 0; i < stream.length; i++) {
        const op = stream[i]!;
        ops[id] = op;
        opChain[id] = chain;
        nodeOf[id] = id;
        readRanks[id] = readRank(rank, op);
        writeRanks[id] = writeRank(rank, op);
        reduces[id] = reducesInto(op) ? 1 : 0;
        collective[id] = op.kind === "collective" ? 1 : 0;
        depStart[id] = deps;
        // Indexed, not for-of: iterating a frozen (shared) list allocates a result per step.
        const opDeps = op.deps;
        for (let k = 0; k < opDeps.length; k++) {
          const dep = opDeps[k]!;
          if (dep.kind !== "op") continue;
          if (deps === depOp.length) depOp = grow(depOp);
          depOp[deps++] = chainStart[rankChain[dep.rank]! + dep.stream]! + dep.index;
        }
        id++;
      }
      chain++;
    }
  }
  depStart[total] = deps;
  const instances = new Map<number, number[]>();
  const unmatched: UnmatchedCollective[] = [];
  const open = new Map<string, number[][]>();
  const seenPerRank = new Map<string, number>();
  for (let o = 0; o < total; o++) {
    if (collective[o] !== 1) continue;
    const op = ops[o];
    if (op?.kind !== "collective") continue;
    const key = `${op.collective}|${op.ranks.join(",")}|${op.axis}`;
    const rank = chainRank[opChain[o]!]!;
    const rankKey = `${rank}|${key}`;
    const k = seenPerRank.get(rankKey) ?? 0;
    seenPerRank.set(rankKey, k + 1);
    let calls = open.get(key);
    if (calls === undefined) open.set(key, (calls = []));
    let members = calls[k];
    if (members === undefined) calls[k] = members = new Array<number>(op.ranks.length).fill(-1);
    members[op.ranks.indexOf(rank)] = o;
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
        const firstRank = chainRank[opChain[first]!]!;
        unmatched.push({ op: disagree, reason: `its src/dst sizes or reduction differ from rank ${firstRank}'s matching call` });
        continue;
      }
      for (const m of present) nodeOf[m] = first;
      instances.set(first, members);
    }
  }
  return {
    index: {
      plan,
      world,
      ops,
      opChain,
      chainStart,
      chainRank,
      chainStream,
      nodeOf,
      instances,
      readRank: readRanks,
      writeRank: writeRanks,
      reduces,
      collective,
      depStart,
      depOp,
    },
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
  if (op === undefined || index.writeRank[o] !== rank) return region;
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
