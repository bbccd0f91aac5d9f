// Reference copy (test oracle): the validator as it was before its per-op arrays, region
// interning and CSR rewrite, kept so a property test can check that the fast path reports
// exactly what this straightforward version reports. Not part of the package's surface.
// The happens-before graph of a plan: one node per op (one per collective instance, shared
// by its participants), edges from stream order and from `op` dependencies across ranks.
// Built as CSR arrays; a topological order (Kahn) both finds deadlocks and drives symbolic
// execution, and bounds the reachability searches of the race check.
import type { PlanIndex } from "./plan-index.js";

/** CSR happens-before graph over op ids (only representative ids are nodes). */
export interface HbGraph {
  readonly size: number;
  readonly isNode: Uint8Array;
  readonly succStart: Int32Array;
  readonly succ: Int32Array;
  readonly predStart: Int32Array;
  readonly pred: Int32Array;
  /** Nodes in a topological order (all nodes when acyclic). */
  readonly order: Int32Array;
  /** Position of each node in `order`, or -1 when it lies on or behind a cycle. */
  readonly pos: Int32Array;
  readonly acyclic: boolean;
}

function csr(size: number, from: Int32Array, to: Int32Array, count: number): { start: Int32Array; adj: Int32Array } {
  const start = new Int32Array(size + 1);
  for (let e = 0; e < count; e++) start[(from[e] ?? 0) + 1]!++;
  for (let v = 0; v < size; v++) start[v + 1]! += start[v] ?? 0;
  const fill = start.slice(0, size);
  const adj = new Int32Array(count);
  for (let e = 0; e < count; e++) adj[fill[from[e] ?? 0]!++] = to[e] ?? 0;
  return { start, adj };
}

/** Builds the graph and a topological order. Self-edges are kept (they are cycles: an op waiting on itself). */
export function buildGraph(index: PlanIndex): HbGraph {
  const size = index.ops.length;
  const isNode = new Uint8Array(size);
  let edges = 0;
  for (let o = 0; o < size; o++) {
    isNode[index.nodeOf[o] ?? 0] = 1;
    if ((index.opIndex[o] ?? 0) > 0) edges++;
    edges += index.ops[o]?.deps.length ?? 0;
  }
  const from = new Int32Array(edges);
  const to = new Int32Array(edges);
  let e = 0;
  for (let o = 0; o < size; o++) {
    const node = index.nodeOf[o] ?? 0;
    if ((index.opIndex[o] ?? 0) > 0) {
      from[e] = index.nodeOf[o - 1] ?? 0;
      to[e++] = node;
    }
    for (const dep of index.ops[o]?.deps ?? []) {
      if (dep.kind !== "op") continue;
      const base = index.streamBase[dep.rank]?.[dep.stream] ?? 0;
      from[e] = index.nodeOf[base + dep.index] ?? 0;
      to[e++] = node;
    }
  }
  const succ = csr(size, from, to, e);
  const pred = csr(size, to, from, e);
  const indeg = new Int32Array(size);
  for (let k = 0; k < e; k++) indeg[to[k] ?? 0]!++;
  const order = new Int32Array(size);
  const pos = new Int32Array(size).fill(-1);
  let head = 0;
  let tail = 0;
  for (let v = 0; v < size; v++) if (isNode[v] === 1 && indeg[v] === 0) order[tail++] = v;
  while (head < tail) {
    const v = order[head++] ?? 0;
    pos[v] = head - 1;
    for (let k = succ.start[v] ?? 0; k < (succ.start[v + 1] ?? 0); k++) {
      const w = succ.adj[k] ?? 0;
      if (--indeg[w]! === 0) order[tail++] = w;
    }
  }
  let nodes = 0;
  for (let v = 0; v < size; v++) nodes += isNode[v] ?? 0;
  return {
    size,
    isNode,
    succStart: succ.start,
    succ: succ.adj,
    predStart: pred.start,
    pred: pred.adj,
    order: order.subarray(0, tail),
    pos,
    acyclic: tail === nodes,
  };
}

/**
 * One dependency cycle among the nodes Kahn's algorithm could not order, in
 * happens-before direction: `cycle[k]` must finish before `cycle[k+1]` starts, and the
 * last before the first, so none can start.
 */
export function findCycle(g: HbGraph): number[] {
  // Walking predecessors inside the unordered set must revisit a node: each has one.
  const stuck = (v: number): boolean => g.isNode[v] === 1 && g.pos[v] === -1;
  let start = -1;
  for (let v = 0; v < g.size && start < 0; v++) if (stuck(v)) start = v;
  if (start < 0) return [];
  const seenAt = new Map<number, number>();
  const path: number[] = [];
  let v = start;
  while (!seenAt.has(v)) {
    seenAt.set(v, path.length);
    path.push(v);
    let next = -1;
    for (let k = g.predStart[v] ?? 0; k < (g.predStart[v + 1] ?? 0) && next < 0; k++) {
      const p = g.pred[k] ?? 0;
      if (stuck(p)) next = p;
    }
    if (next < 0) return path; // unreachable: a stuck node always has a stuck predecessor
    v = next;
  }
  return path.slice(seenAt.get(v)).reverse();
}

/** Answers "does a happen before b" by backward search from b, pruned by topological position. */
export class Reachability {
  private readonly stamp: Int32Array;
  private readonly queue: Int32Array;
  private generation = 0;

  constructor(
    private readonly g: HbGraph,
    private readonly index: PlanIndex,
  ) {
    this.stamp = new Int32Array(g.size);
    this.queue = new Int32Array(g.size);
  }

  /** True when node `a` must complete before node `b` starts (a path a → … → b). */
  happensBefore(a: number, b: number): boolean {
    const g = this.g;
    const pa = g.pos[a] ?? -1;
    const pb = g.pos[b] ?? -1;
    if (a === b || pa < 0 || pb < 0 || pa >= pb) return false;
    const chainA = this.index.opChain[a];
    const idxA = this.index.opIndex[a] ?? 0;
    if (this.index.opChain[b] === chainA) return idxA < (this.index.opIndex[b] ?? 0);
    for (let k = g.predStart[b] ?? 0; k < (g.predStart[b + 1] ?? 0); k++) {
      const p = g.pred[k] ?? 0;
      if (p === a || (this.index.opChain[p] === chainA && (this.index.opIndex[p] ?? 0) >= idxA)) return true;
    }
    const gen = ++this.generation;
    let head = 0;
    let tail = 0;
    this.queue[tail++] = b;
    this.stamp[b] = gen;
    while (head < tail) {
      const v = this.queue[head++] ?? 0;
      for (let k = g.predStart[v] ?? 0; k < (g.predStart[v + 1] ?? 0); k++) {
        const p = g.pred[k] ?? 0;
        if (p === a) return true;
        if (this.stamp[p] === gen || (g.pos[p] ?? -1) < pa) continue;
        if (this.index.opChain[p] === chainA && (this.index.opIndex[p] ?? 0) >= idxA) return true;
        this.stamp[p] = gen;
        this.queue[tail++] = p;
      }
    }
    return false;
  }
}
