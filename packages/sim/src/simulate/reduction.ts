// The reduction kernel of a plan whose transfers accumulate: per rank, the regions it sums
// (partials landed plus its own), the pass over them, and, across nodes, the network
// transfers that must wait for a sum before they send it (hierarchical ReduceScatter).
import { type ChunkPlan, formatRegion, intersect, type Region, regionBytes, type TensorDecl } from "@ovl/chunk-plan";
import type { HardwareModel } from "./hardware.js";
import type { CommSimInput, OpTiming } from "./comm.js";
import { simulateComm } from "./comm.js";
import { crossesNodes } from "./network.js";

/** One piece of a rank's reduction: a region accumulated into, its pass bytes and the ops landing in it. */
export interface ReduceSegment {
  readonly region: Region;
  /** Read and written by the pass: every accumulated partial, the rank's own partial, the result. */
  readonly bytes: number;
  /** Keys (`rank/stream/index`) of the ops whose data lands in the region. */
  readonly ops: readonly string[];
  /** Some op of the plan reads the sum (it is forwarded, not final): the pass reduces it first. */
  readonly forwarded: boolean;
}

export const opKey = (rank: number, stream: number, index: number): string => `${rank}/${stream}/${index}`;

export function opEnds(ops: readonly OpTiming[]): Map<string, number> {
  return new Map(ops.map((o) => [opKey(o.rank, o.stream, o.index), o.end]));
}

/** Where an op reads: the rank holding its source and the region. */
function readOf(rank: number, op: ChunkPlan["ranks"][number]["streams"][number][number]): { rank: number; region: Region } {
  return { rank: op.kind === "p2p" && op.side === "pull" ? op.peer : rank, region: op.src };
}

/**
 * What the reduction kernel does on each rank. Transfers that accumulate (`reduce`) land as
 * partials (a copy engine can only copy; the emitted SM pushes copy too), and a memory kernel
 * sums them: per region accumulated into, it reads every partial delivered there plus the
 * rank's own and writes the result once (`(W + 1)` region sizes for a direct
 * ReduceScatter over W ranks). Regions whose sum some op reads first (a hierarchical
 * ReduceScatter's node sums, which then cross the network), each group in row-major order, the
 * order the kernel visits them.
 */
export function reductionWork(plan: ChunkPlan): ReduceSegment[][] {
  const decls = new Map<string, TensorDecl>(plan.tensors.map((t) => [t.name, t]));
  const landing = plan.ranks.map(() => [] as { key: string; region: Region; reduce: boolean }[]);
  const reads = plan.ranks.map(() => [] as Region[]);
  for (const rp of plan.ranks) {
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        if (op.kind === "collective") return;
        const dst = op.kind === "p2p" && op.side === "push" ? op.peer : rp.rank;
        landing[dst]?.push({ key: opKey(rp.rank, s, i), region: op.dst, reduce: op.reduce !== undefined });
        const read = readOf(rp.rank, op);
        reads[read.rank]?.push(read.region);
      }),
    );
  }
  return landing.map((ops, rank) => {
    const regions = new Map<string, Region>();
    for (const o of ops) if (o.reduce) regions.set(formatRegion(o.region), o.region);
    const segments = [...regions.values()].map((region): ReduceSegment => {
      const decl = decls.get(region.tensor)!;
      const meeting = ops.filter((o) => intersect(o.region, region) !== undefined);
      const partials = meeting.filter((o) => o.reduce).reduce((a, o) => a + regionBytes(intersect(o.region, region)!, decl), 0);
      const forwarded = (reads[rank] ?? []).some((r) => intersect(r, region) !== undefined);
      return { region, bytes: partials + 2 * regionBytes(region, decl), ops: meeting.map((o) => o.key), forwarded };
    });
    return segments.sort((a, b) => Number(b.forwarded) - Number(a.forwarded) || compareOffsets(a.region.offsets, b.region.offsets));
  });
}

function compareOffsets(a: readonly number[], b: readonly number[]): number {
  for (let d = 0; d < Math.max(a.length, b.length); d++) {
    const diff = (a[d] ?? 0) - (b[d] ?? 0);
    if (diff !== 0) return diff;
  }
  return 0;
}

/** The reduction pass of one rank: its start, end and the end of each segment (in segment order). */
export interface ReductionPass {
  readonly start: number;
  readonly end: number;
  readonly segmentEnds: readonly number[];
}

/**
 * The reduction kernel on one rank: it starts at `start` (after the compute kernel on the
 * same stream), pays its fixed cost, then streams through its regions in order at
 * `gbps`, each region once every op landing in it has ended (the kernel waits per chunk).
 * Null when the rank reduces nothing.
 */
export function reductionPass(
  segments: readonly ReduceSegment[],
  start: number,
  launchMs: number,
  gbps: number,
  ends: Map<string, number>,
): ReductionPass | null {
  if (segments.length === 0) return null;
  let t = start + launchMs;
  const segmentEnds: number[] = [];
  for (const seg of segments) {
    const ready = Math.max(0, ...seg.ops.map((k) => ends.get(k) ?? 0));
    t = Math.max(t, ready) + seg.bytes / (gbps * 1e6);
    segmentEnds.push(t);
  }
  return { start, end: t, segmentEnds };
}

/**
 * Per network transfer that reads a sum its source rank accumulates: that rank and the indices
 * of its segments meeting the read. A NIC's RDMA engine sends memory as it is, so such a
 * transfer waits until the reduction kernel has written the sum (inside a node the simulator
 * keeps its earlier rule: the plan's dependencies order forwarded sums, as the fused
 * reduce-and-forward kernels do).
 */
export function networkSumReads(
  plan: ChunkPlan,
  hw: HardwareModel,
  work: readonly ReduceSegment[][],
): Map<string, { rank: number; segments: number[] }> {
  const out = new Map<string, { rank: number; segments: number[] }>();
  if (hw.topology === undefined) return out;
  for (const rp of plan.ranks) {
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        if (op.kind !== "p2p") return;
        const read = readOf(rp.rank, op);
        const other = read.rank === rp.rank ? op.peer : rp.rank;
        if (!crossesNodes(hw, read.rank, other)) return;
        const segments = (work[read.rank] ?? []).flatMap((seg, k) => (intersect(seg.region, read.region) === undefined ? [] : [k]));
        if (segments.length > 0) out.set(opKey(rp.rank, s, i), { rank: read.rank, segments });
      }),
    );
  }
  return out;
}

/** What {@link settleComm} needs to price the reduction passes between communication runs. */
export interface SettleInput {
  readonly work: readonly ReduceSegment[][];
  readonly waits: ReadonlyMap<string, { rank: number; segments: number[] }>;
  /** When each rank's reduction kernel starts (ms). */
  readonly reduceStart: (rank: number) => number;
  readonly launchMs: number;
  readonly gbps: number;
}

/**
 * The communication run when network transfers wait for sums (`waits` not empty): run it,
 * price the reduction passes from its op ends, run it again with each waiting transfer held
 * until its segments are reduced, until no op end moves (each round settles one more stage of
 * the plan's dependency chain; at most 16 rounds). Without waits: one run, as before.
 */
export function settleComm(comm: CommSimInput, s: SettleInput): OpTiming[] {
  let ops = simulateComm(comm);
  if (s.waits.size === 0) return ops;
  for (let round = 0; round < 16; round++) {
    const ends = opEnds(ops);
    const passes = s.work.map((segs, r) => reductionPass(segs, s.reduceStart(r), s.launchMs, s.gbps, ends));
    const readyAfter = (rank: number, stream: number, index: number): number => {
      const w = s.waits.get(opKey(rank, stream, index));
      if (w === undefined) return 0;
      const pass = passes[w.rank];
      return Math.max(0, ...w.segments.map((k) => pass?.segmentEnds[k] ?? 0));
    };
    const next = simulateComm({ ...comm, readyAfter });
    const moved = next.some((o, k) => Math.abs(o.end - ops[k]!.end) > 1e-12);
    ops = next;
    if (!moved) break;
  }
  return ops;
}
