// Stream assignment: which of a rank's concurrent streams each op runs on. Ops are re-dealt
// under a policy in an order consistent with every dependency (so no new deadlock), and
// ops that touched the same data in one stream stay ordered by an explicit dependency.
import type { ChunkPlan, Dependency, Op } from "../model/schema.js";
import { opAccesses } from "./access.js";
import { cloneDependency, cloneOp, clonePlanHeader, cloneRegion } from "./clone.js";
import { conflictingPairs } from "./conflicts.js";
import { checkInteger, PlanError } from "./errors.js";
import { checkPlanStructure } from "./structure.js";

/**
 * How {@link assignStreams} deals a rank's ops onto streams:
 * - `"single"`: one stream per rank.
 * - `"per-peer"`: one stream per peer of the rank's point-to-point ops (ascending peer);
 *   local copies and collectives share one more stream, listed first.
 * - `{ kind: "round-robin", streams: k }`: `k` streams, ops dealt in turn.
 */
export type StreamPolicy = "single" | "per-peer" | { readonly kind: "round-robin"; readonly streams: number };

/** The round-robin policy over `streams` streams. */
export function roundRobin(streams: number): StreamPolicy {
  return { kind: "round-robin", streams: checkInteger(streams, "round-robin stream count", 1) };
}

interface Position {
  stream: number;
  index: number;
}

/** Longest-path depth of every op in the graph of stream order and op dependencies. */
function opLevels(plan: ChunkPlan): number[][][] {
  const ids: number[][][] = [];
  const nodes: { r: number; s: number; i: number }[] = [];
  plan.ranks.forEach((rp, r) => {
    ids.push(rp.streams.map((ops, s) => ops.map((_, i) => nodes.push({ r, s, i }) - 1)));
  });
  const succ: number[][] = nodes.map(() => []);
  const indeg = new Array<number>(nodes.length).fill(0);
  const edge = (from: number, to: number): void => {
    succ[from]!.push(to);
    indeg[to]!++;
  };
  plan.ranks.forEach((rp, r) =>
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        const id = ids[r]![s]![i]!;
        if (i > 0) edge(ids[r]![s]![i - 1]!, id);
        for (let k = 0; k < op.deps.length; k++) {
          const dep = op.deps[k]!;
          if (dep.kind === "op") edge(ids[dep.rank]![dep.stream]![dep.index]!, id);
        }
      }),
    ),
  );
  const level = new Array<number>(nodes.length).fill(0);
  const ready = nodes.map((_, id) => id).filter((id) => indeg[id] === 0);
  let seen = 0;
  while (ready.length > 0) {
    const id = ready.pop()!;
    seen++;
    for (const next of succ[id]!) {
      level[next] = Math.max(level[next]!, level[id]! + 1);
      if (--indeg[next]! === 0) ready.push(next);
    }
  }
  if (seen !== nodes.length) {
    throw new PlanError("cycle", "the plan's dependencies form a cycle (a deadlock); no stream assignment can run it");
  }
  return ids.map((streams) => streams.map((ops) => ops.map((id) => level[id]!)));
}

function streamKeys(ops: readonly Op[], policy: StreamPolicy): { count: number; of: (op: Op, k: number) => number } {
  if (policy === "single") return { count: 1, of: () => 0 };
  if (policy === "per-peer") {
    const peers = [...new Set(ops.flatMap((op) => (op.kind === "p2p" ? [op.peer] : [])))].sort((a, b) => a - b);
    const shared = ops.some((op) => op.kind !== "p2p") ? 1 : 0;
    const slot = new Map(peers.map((p, i) => [p, i + shared]));
    return { count: peers.length + shared, of: (op) => (op.kind === "p2p" ? slot.get(op.peer)! : 0) };
  }
  if (typeof policy === "object" && policy.kind === "round-robin") {
    const k = checkInteger(policy.streams, "round-robin stream count", 1);
    return { count: k, of: (_, order) => order % k };
  }
  throw new PlanError("invalid-policy", `unknown stream policy ${JSON.stringify(policy)}; use "single", "per-peer" or roundRobin(k)`);
}

/**
 * Re-deals every rank's ops onto streams under `policy`, keeping the multiset of ops.
 * A rank's ops are taken in order of their depth in the plan's dependency graph (ties by
 * old stream, then index), so every dependency still points to an op placed earlier in
 * the same stream or to another stream: the reassignment adds no cycle. Dependencies are
 * rewritten to the new positions; two ops that were ordered by a shared stream and touch
 * overlapping data (one writing) but land on different streams get an explicit dependency,
 * so no data race appears. `signals` describe op positions and are dropped.
 *
 * Throws `cycle` when the plan already deadlocks, `invalid-policy` for an unknown policy.
 */
export function assignStreams(plan: ChunkPlan, policy: StreamPolicy): ChunkPlan {
  checkPlanStructure(plan);
  const levels = opLevels(plan);
  const positions: Position[][][] = [];
  const layouts = plan.ranks.map((rp, r) => {
    const order = rp.streams
      .flatMap((ops, s) => ops.map((op, i) => ({ op, s, i, level: levels[r]![s]![i]! })))
      .sort((a, b) => a.level - b.level || a.s - b.s || a.i - b.i);
    const keys = streamKeys(
      order.map((e) => e.op),
      policy,
    );
    const streams: { op: Op; s: number; i: number }[][] = Array.from({ length: keys.count }, () => []);
    const pos: Position[][] = rp.streams.map((ops) => ops.map(() => ({ stream: 0, index: 0 })));
    order.forEach((entry, k) => {
      const stream = keys.of(entry.op, k);
      pos[entry.s]![entry.i] = { stream, index: streams[stream]!.length };
      streams[stream]!.push(entry);
    });
    positions.push(pos);
    return streams;
  });

  const earlierConflicts = plan.ranks.map((rp, r) =>
    rp.streams.map((ops) => {
      const lists: number[][] = ops.map(() => []);
      for (const [p, i] of conflictingPairs(ops.map((op) => opAccesses(op, r)))) lists[i]!.push(p);
      return lists.map((l) => l.sort((a, b) => a - b));
    }),
  );
  const depKey = (d: Dependency): string => (d.kind === "op" ? `${d.rank}.${d.stream}.${d.index}` : "");
  return {
    ...clonePlanHeader(plan),
    ranks: plan.ranks.map((rp, r) => ({
      rank: rp.rank,
      local: rp.local.map(cloneRegion),
      streams: layouts[r]!.map((entries) =>
        entries.map(({ op, s, i }) => {
          const deps: Dependency[] = op.deps.map((dep) => {
            if (dep.kind === "compute") return cloneDependency(dep);
            const at = positions[dep.rank]![dep.stream]![dep.index]!;
            return { kind: "op", rank: dep.rank, stream: at.stream, index: at.index };
          });
          const here = positions[r]![s]![i]!;
          const seen = new Set(deps.map(depKey));
          // Ops earlier in the old stream were ordered before this one for free; keep that
          // order where it protected data and the two no longer share a stream.
          for (const p of earlierConflicts[r]![s]![i]!) {
            const at = positions[r]![s]![p]!;
            if (at.stream === here.stream) continue;
            const dep: Dependency = { kind: "op", rank: r, stream: at.stream, index: at.index };
            if (!seen.has(depKey(dep))) {
              seen.add(depKey(dep));
              deps.push(dep);
            }
          }
          return cloneOp(op, deps);
        }),
      ),
    })),
  };
}
