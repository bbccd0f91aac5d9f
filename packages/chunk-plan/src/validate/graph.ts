// The happens-before graph of a plan: one node per op (one per collective instance, shared
// by its participants), edges from stream order and from `op` dependencies across ranks.
// Stream edges are implicit (ids run along streams) and dependency edges are the plan
// index's own lists, read forwards and through one reverse list: the graph adds two arrays
// of the plan's size to the index. A topological order (Kahn) both finds deadlocks and
// drives symbolic execution, and bounds the reachability searches of the race check.
import type { PlanIndex } from "./plan-index.js";

/** Happens-before graph over op ids (only representative ids are nodes: `nodeOf[v] === v`). */
export interface HbGraph {
  readonly size: number;
  readonly index: PlanIndex;
  /**
   * The ops that name op `d` as a dependency, ascending (an op twice when it names `d`
   * twice): `dependents[dependentStart[d] .. dependentStart[d + 1])`.
   */
  readonly dependentStart: Int32Array;
  readonly dependents: Int32Array;
  /** Per collective node, its participants in id order. */
  readonly members: ReadonlyMap<number, readonly number[]>;
  /** Nodes in a topological order (all nodes when acyclic). */
  readonly order: Int32Array;
  /** Position of each node in `order`, or -1 when it lies on or behind a cycle. */
  readonly pos: Int32Array;
  readonly acyclic: boolean;
}

/** A reusable list of node ids: one node's predecessors or successors at a time. */
export class NodeList {
  ids = new Int32Array(16);
  size = 0;

  push(v: number): void {
    if (this.size === this.ids.length) {
      const more = new Int32Array(this.ids.length * 2);
      more.set(this.ids);
      this.ids = more;
    }
    this.ids[this.size++] = v;
  }
}

/** True when op `o` follows op `o - 1` in its stream (ids run along chains). */
function follows(index: PlanIndex, o: number): boolean {
  return o > 0 && index.opChain[o - 1] === index.opChain[o];
}

/**
 * The predecessors of node `v` into `out` (cleared first), in the order the edges are
 * defined: per participant in id order, its stream predecessor, then its dependencies.
 */
export function predecessors(g: HbGraph, v: number, out: NodeList): NodeList {
  out.size = 0;
  const members = g.index.collective[v] === 1 ? g.members.get(v) : undefined;
  if (members === undefined) addPredecessors(g.index, v, out);
  else for (const m of members) addPredecessors(g.index, m, out);
  return out;
}

/** The stream predecessor and the dependencies of op `o`, as nodes. */
function addPredecessors(index: PlanIndex, o: number, out: NodeList): void {
  const { nodeOf, depStart, depOp } = index;
  if (follows(index, o)) out.push(nodeOf[o - 1]!);
  for (let k = depStart[o]!; k < depStart[o + 1]!; k++) out.push(nodeOf[depOp[k]!]!);
}

/**
 * The successors of node `v` into `out` (cleared first), ordered by the op whose edge it is
 * (its stream edge before its dependency edges): Kahn's algorithm visits them in this order.
 */
export function successors(g: HbGraph, v: number, out: NodeList): NodeList {
  out.size = 0;
  const { nodeOf, opChain, collective } = g.index;
  if (collective[v] === 1) return collectiveSuccessors(g, v, out);
  const { dependentStart, dependents } = g;
  const end = dependentStart[v + 1]!;
  let k = dependentStart[v]!;
  const next = v + 1;
  if (next < g.size && opChain[next] === opChain[v]) {
    while (k < end && dependents[k]! < next) out.push(nodeOf[dependents[k++]!]!);
    out.push(nodeOf[next]!);
  }
  while (k < end) out.push(nodeOf[dependents[k++]!]!);
  return out;
}

/** {@link successors} of a collective node: the edges of every op that follows or names one of its participants. */
function collectiveSuccessors(g: HbGraph, v: number, out: NodeList): NodeList {
  const { nodeOf, depStart, depOp } = g.index;
  const ops = new Set<number>();
  for (const m of g.members.get(v) ?? [v]) {
    if (m + 1 < g.size && follows(g.index, m + 1)) ops.add(m + 1);
    for (let k = g.dependentStart[m]!; k < g.dependentStart[m + 1]!; k++) ops.add(g.dependents[k]!);
  }
  for (const o of [...ops].sort((a, b) => a - b)) {
    if (follows(g.index, o) && nodeOf[o - 1] === v) out.push(nodeOf[o]!);
    for (let k = depStart[o]!; k < depStart[o + 1]!; k++) if (nodeOf[depOp[k]!] === v) out.push(nodeOf[o]!);
  }
  return out;
}

/** Builds the graph and a topological order. Self-edges are kept (they are cycles: an op waiting on itself). */
export function buildGraph(index: PlanIndex): HbGraph {
  const size = index.ops.length;
  const { nodeOf, depStart, depOp } = index;
  const dependentStart = new Int32Array(size + 1);
  const edges = depStart[size]!;
  for (let k = 0; k < edges; k++) dependentStart[depOp[k]! + 1]!++;
  for (let d = 0; d < size; d++) dependentStart[d + 1]! += dependentStart[d]!;
  const dependents = new Int32Array(edges);
  // `order` and `pos` serve as scratch before they are filled: the fill cursors of
  // `dependents`, then the in-degrees (a node's entry is its in-degree until Kahn's
  // algorithm reaches it).
  const order = new Int32Array(size);
  const pos = new Int32Array(size);
  const cursor = order;
  cursor.set(dependentStart.subarray(0, size));
  for (let o = 0; o < size; o++) for (let k = depStart[o]!; k < depStart[o + 1]!; k++) dependents[cursor[depOp[k]!]!++] = o;
  const members = new Map<number, readonly number[]>();
  for (const [node, participants] of index.instances)
    members.set(
      node,
      [...participants].sort((a, b) => a - b),
    );
  const indeg = pos.fill(0);
  let nodes = 0;
  for (let o = 0; o < size; o++) {
    const node = nodeOf[o]!;
    if (node === o) nodes++;
    indeg[node]! += (follows(index, o) ? 1 : 0) + depStart[o + 1]! - depStart[o]!;
  }
  const graph: HbGraph = { size, index, dependentStart, dependents, members, order, pos, acyclic: false };
  let head = 0;
  let tail = 0;
  for (let v = 0; v < size; v++) if (nodeOf[v] === v && indeg[v] === 0) order[tail++] = v;
  const next = new NodeList();
  while (head < tail) {
    const { ids, size: n } = successors(graph, order[head++]!, next);
    for (let i = 0; i < n; i++) {
      const w = ids[i]!;
      if (--indeg[w]! === 0) order[tail++] = w;
    }
  }
  pos.fill(-1);
  for (let k = 0; k < tail; k++) pos[order[k]!] = k;
  return { ...graph, order: order.subarray(0, tail), acyclic: tail === nodes };
}

/**
 * One dependency cycle among the nodes Kahn's algorithm could not order, in
 * happens-before direction: `cycle[k]` must finish before `cycle[k+1]` starts, and the
 * last before the first, so none can start.
 */
export function findCycle(g: HbGraph): number[] {
  // Walking predecessors inside the unordered set must revisit a node: each has one.
  const stuck = (v: number): boolean => g.index.nodeOf[v] === v && g.pos[v] === -1;
  let start = -1;
  for (let v = 0; v < g.size && start < 0; v++) if (stuck(v)) start = v;
  if (start < 0) return [];
  const seenAt = new Map<number, number>();
  const path: number[] = [];
  const preds = new NodeList();
  let v = start;
  while (!seenAt.has(v)) {
    seenAt.set(v, path.length);
    path.push(v);
    const { ids, size } = predecessors(g, v, preds);
    let next = -1;
    for (let i = 0; i < size && next < 0; i++) if (stuck(ids[i]!)) next = ids[i]!;
    if (next < 0) return path; // unreachable: a stuck node always has a stuck predecessor
    v = next;
  }
  return path.slice(seenAt.get(v)).reverse();
}

/** Answers "does a happen before b" by backward search from b, pruned by topological position. */
export class Reachability {
  /** Search marks and queue, allocated on the first search (most queries never need one). */
  private stamp: Int32Array | undefined;
  private queue: Int32Array | undefined;
  private generation = 0;
  private readonly preds = new NodeList();

  constructor(private readonly g: HbGraph) {}

  /** True when node `a` must complete before node `b` starts (a path a → … → b). */
  happensBefore(a: number, b: number): boolean {
    const g = this.g;
    const pa = g.pos[a] ?? -1;
    const pb = g.pos[b] ?? -1;
    if (a === b || pa < 0 || pb < 0 || pa >= pb) return false;
    // Ops of one chain run in id order: an op at or after `a` on its chain follows `a`.
    const chain = g.index.opChain;
    const chainA = chain[a];
    if (chain[b] === chainA) return a < b;
    const direct = predecessors(g, b, this.preds);
    for (let i = 0; i < direct.size; i++) {
      const p = direct.ids[i]!;
      if (p === a || (chain[p] === chainA && p >= a)) return true;
    }
    const stamp = (this.stamp ??= new Int32Array(g.size));
    const queue = (this.queue ??= new Int32Array(g.size));
    const gen = ++this.generation;
    let head = 0;
    let tail = 0;
    queue[tail++] = b;
    stamp[b] = gen;
    while (head < tail) {
      const { ids, size } = predecessors(g, queue[head++]!, this.preds);
      for (let i = 0; i < size; i++) {
        const p = ids[i]!;
        if (p === a) return true;
        if (stamp[p] === gen || g.pos[p]! < pa) continue;
        if (chain[p] === chainA && p >= a) return true;
        stamp[p] = gen;
        queue[tail++] = p;
      }
    }
    return false;
  }
}
