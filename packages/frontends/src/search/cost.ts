// The analytic cost model of the schedule search (alpha-beta per link level, FLOPs over
// peak, overlap as max for ring passes and sum for collectives). A `CostModel` is a plain
// function of a schedule's summary, so the simulator can replace this one.
import { meshCoords, regionBytes } from "@ovl/chunk-plan";
import type { CommKind, ProgramFacts } from "../commir/analyze.js";
import { estimateMemory } from "../commir/memory.js";

/** One link class: `latency` in seconds (alpha), `bandwidth` in bytes per second (1 / beta). */
export interface Link {
  readonly latency: number;
  readonly bandwidth: number;
}

/** The machine a schedule runs on. */
export interface Hardware {
  /** Dense peak of one GPU, FLOP/s. */
  readonly peakFlops: number;
  /** Memory of one GPU, bytes: the search's default capacity. */
  readonly memoryBytes: number;
  /** GPUs sharing the fast intra-node link; ranks are numbered node by node. */
  readonly gpusPerNode: number;
  readonly intra: Link;
  readonly inter: Link;
}

/**
 * One H100 SXM node type as Mercury Table 3 lists it (989 TFLOP/s dense bf16, 80 GB, NVLink
 * 900 GB/s bidirectional, 100 Gb/s between nodes); latencies are typical NCCL figures.
 */
export function h100Cluster(gpusPerNode = 8): Hardware {
  return {
    peakFlops: 989e12,
    memoryBytes: 80e9,
    gpusPerNode,
    intra: { latency: 5e-6, bandwidth: 450e9 },
    inter: { latency: 20e-6, bandwidth: 12.5e9 },
  };
}

/** One communication term of a schedule: `steps` transfers of `bytesPerStep` over `level`'s link. */
export interface CommTerm {
  readonly buffer: string;
  readonly kind: CommKind;
  readonly level: number;
  readonly steps: number;
  readonly bytesPerStep: number;
  /** Ring passes and broadcasts overlap with compute; collectives before or after it do not. */
  readonly overlapped: boolean;
}

/** What a cost model sees of a scheduled program on a mesh. */
export interface ScheduleSummary {
  readonly mesh: readonly number[];
  readonly flopsPerRank: number;
  readonly memoryBytes: number;
  readonly comm: readonly CommTerm[];
}

/** A cost model: estimated seconds of a schedule on some hardware (lower is better). */
export type CostModel = (summary: ScheduleSummary, hw: Hardware) => number;

/** The link a mesh level's neighbours talk over: intra-node when the level's span fits in a node. */
export function levelLink(mesh: readonly number[], level: number, hw: Hardware): Link {
  const stride = mesh.slice(level + 1).reduce((a, b) => a * b, 1);
  return stride * mesh[level]! <= hw.gpusPerNode ? hw.intra : hw.inter;
}

/** The outermost mesh level on which the members of a group differ (their slowest link). */
function groupLevel(mesh: readonly number[], group: readonly number[]): number {
  const coords = group.map((q) => meshCoords(q, { shape: [...mesh] }));
  const level = mesh.findIndex((_, l) => coords.some((c) => c[l] !== coords[0]![l]));
  return Math.max(0, level);
}

/** Summarises rank 0 of an analysed program (ranks are symmetric in these schedules). */
export function summarize(facts: ProgramFacts, flopsPerPoint = 2): ScheduleSummary {
  const mesh = facts.mesh.shape;
  const comm: CommTerm[] = [];
  for (const f of facts.buffers) {
    const g = f.group[0]!;
    const n = g.length;
    const held = regionBytes(f.held[0]!, f.tensor);
    if (f.comm === "ring") {
      // Steps whose innermost advancing shifted loop is k: (prod of outer extents) * (n_k - 1).
      let outer = 1;
      for (const r of f.ring!) {
        comm.push({ buffer: f.buffer, kind: "ring", level: r.level, steps: outer * (r.extent - 1), bytesPerStep: held, overlapped: true });
        outer *= r.extent;
      }
    } else if (f.comm === "broadcast") {
      // One block per step from its owner to the group, overlapped with the previous step's compute.
      comm.push({
        buffer: f.buffer,
        kind: "broadcast",
        level: groupLevel(mesh, g),
        steps: f.broadcast!.extent - 1,
        bytesPerStep: held,
        overlapped: true,
      });
    } else if (f.comm === "all-gather" || f.comm === "p2p") {
      const bytes = regionBytes(f.needed[0]!, f.tensor) - held;
      if (n > 1 && bytes > 0)
        comm.push({
          buffer: f.buffer,
          kind: f.comm,
          level: groupLevel(mesh, g),
          steps: n - 1,
          bytesPerStep: bytes / (n - 1),
          overlapped: false,
        });
    } else if (f.comm === "all-reduce" || f.comm === "reduce-scatter") {
      const steps = f.comm === "all-reduce" ? 2 * (n - 1) : n - 1;
      comm.push({ buffer: f.buffer, kind: f.comm, level: groupLevel(mesh, g), steps, bytesPerStep: held / n, overlapped: false });
    }
  }
  return { mesh: [...mesh], flopsPerRank: facts.pointsPerRank * flopsPerPoint, memoryBytes: estimateMemory(facts).maxBytes, comm };
}

/**
 * The default cost model. Compute is `flops / peak`; each term costs `steps · (α + bytes / β)`
 * on its level's link. Collectives (all-gather before, reductions after compute) add to the
 * time; ring passes and broadcasts overlap with compute: a ring of S steps computes S + 1 blocks, so the time
 * is `max(compute, ring) + min(compute, ring) / (S + 1)` (one block of the shorter side is
 * exposed at fill or drain).
 */
export const analyticCost: CostModel = (s, hw) => {
  const compute = s.flopsPerRank / hw.peakFlops;
  const time = (t: CommTerm): number => {
    const link = levelLink(s.mesh, t.level, hw);
    return t.steps * (link.latency + t.bytesPerStep / link.bandwidth);
  };
  const sync = s.comm.filter((t) => !t.overlapped).reduce((a, t) => a + time(t), 0);
  const ring = s.comm.filter((t) => t.overlapped).reduce((a, t) => a + time(t), 0);
  const steps = s.comm.filter((t) => t.overlapped).reduce((a, t) => a + t.steps, 0);
  const overlapped = steps === 0 ? compute : Math.max(compute, ring) + Math.min(compute, ring) / (steps + 1);
  return sync + overlapped;
};
