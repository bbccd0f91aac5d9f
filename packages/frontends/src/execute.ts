// Runs a chunk plan's data movement on small per-rank value arrays, so a frontend's
// lowering can be checked against the program it came from: the same values, not only a
// plan that validates. Compute events are one barrier: `compute` runs when nothing else can.
import type { ChunkPlan, CollectiveOp, Op, Reduction, Region, TensorDecl } from "@ovl/chunk-plan";
import { FrontendError } from "./errors.js";

/** Per rank, per tensor name, a row-major array; `undefined` marks an element not (yet) valid there. */
export type RankValues = Map<string, (number | undefined)[]>[];

/** Fresh per-rank buffers of every tensor of `plan`, all invalid except what `init` gives. */
export function emptyValues(plan: ChunkPlan, init?: (rank: number, tensor: TensorDecl, index: number[]) => number | undefined): RankValues {
  return plan.ranks.map((_, r) => {
    const m = new Map<string, (number | undefined)[]>();
    for (const t of plan.tensors) {
      const strides = rowMajor(t.shape);
      const n = t.shape.reduce((a, b) => a * b, 1);
      m.set(
        t.name,
        Array.from({ length: n }, (_, flat) => (init === undefined ? undefined : init(r, t, unflatten(flat, t.shape, strides)))),
      );
    }
    return m;
  });
}

function rowMajor(shape: readonly number[]): number[] {
  const s = shape.map(() => 1);
  for (let d = shape.length - 2; d >= 0; d--) s[d] = s[d + 1]! * shape[d + 1]!;
  return s;
}

function unflatten(flat: number, shape: readonly number[], strides: readonly number[]): number[] {
  return shape.map((_, d) => Math.floor(flat / strides[d]!) % shape[d]!);
}

/** Flat indices of `region`'s elements in row-major order of the region. */
export function regionIndices(region: Region, shape: readonly number[]): number[] {
  const strides = rowMajor(shape);
  let out = [0];
  region.sizes.forEach((size, d) => {
    const next: number[] = [];
    for (const base of out) for (let i = 0; i < size; i++) next.push(base + (region.offsets[d]! + i) * strides[d]!);
    out = next;
  });
  return out;
}

function combine(reduce: Reduction | undefined, old: number | undefined, v: number): number {
  if (reduce === undefined) return v;
  if (old === undefined) throw new FrontendError("execution", "a reducing transfer landed on an element that holds no value yet");
  return reduce === "sum" ? old + v : Math.max(old, v);
}

interface Node {
  rank: number;
  stream: number;
  index: number;
  op: Op;
}

/**
 * Executes `plan` on `values` (changed in place): ops run when their stream predecessor
 * and dependencies are done; a collective runs when every participant has reached it (the
 * k-th collective over the same ranks on each). `compute` runs once when only ops waiting
 * on compute events remain. Reading an invalid element or a stall throws `execution`.
 */
export function runPlan(plan: ChunkPlan, values: RankValues, compute?: (values: RankValues) => void): void {
  const shapes = new Map(plan.tensors.map((t) => [t.name, t.shape] as const));
  const done = new Set<string>();
  const key = (r: number, s: number, i: number): string => `${r}/${s}/${i}`;
  const next = plan.ranks.map((rp) => rp.streams.map(() => 0));
  const collectiveSeq = new Map<string, number>();
  const seqOf = new Map<string, number>();
  for (const rp of plan.ranks) {
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        if (op.kind !== "collective") return;
        const k = `${rp.rank}:${op.ranks.join(",")}`;
        const n = collectiveSeq.get(k) ?? 0;
        collectiveSeq.set(k, n + 1);
        seqOf.set(key(rp.rank, s, i), n);
      }),
    );
  }
  let computed = compute === undefined;
  const ready = (n: Node): boolean => n.op.deps.every((d) => (d.kind === "op" ? done.has(key(d.rank, d.stream, d.index)) : computed));
  const read = (r: number, region: Region): number[] => {
    const arr = values[r]?.get(region.tensor);
    if (arr === undefined) throw new FrontendError("execution", `rank ${r} has no tensor ${region.tensor}`);
    return regionIndices(region, shapes.get(region.tensor)!).map((i) => {
      const v = arr[i];
      if (v === undefined) throw new FrontendError("execution", `rank ${r} reads element ${i} of ${region.tensor} before it is valid`);
      return v;
    });
  };
  const write = (r: number, region: Region, data: readonly number[], reduce?: Reduction): void => {
    const arr = values[r]!.get(region.tensor)!;
    regionIndices(region, shapes.get(region.tensor)!).forEach((i, j) => {
      arr[i] = combine(reduce, arr[i], data[j]!);
    });
  };
  for (;;) {
    let progressed = false;
    for (const rp of plan.ranks) {
      rp.streams.forEach((ops, s) => {
        for (;;) {
          const i = next[rp.rank]![s]!;
          const op = ops[i];
          if (op === undefined || !ready({ rank: rp.rank, stream: s, index: i, op })) return;
          if (op.kind === "collective") {
            const peers = collectivePeers(plan, op, seqOf.get(key(rp.rank, s, i))!, seqOf, next);
            if (peers === undefined || !peers.every((p) => ready(p))) return;
            runCollective(peers, read, write);
            for (const p of peers) {
              done.add(key(p.rank, p.stream, p.index));
              next[p.rank]![p.stream] = p.index + 1;
            }
          } else {
            const from = op.kind === "p2p" && op.side === "pull" ? op.peer : rp.rank;
            const to = op.kind === "p2p" && op.side === "push" ? op.peer : rp.rank;
            write(to, op.dst, read(from, op.src), op.reduce);
            done.add(key(rp.rank, s, i));
            next[rp.rank]![s] = i + 1;
          }
          progressed = true;
        }
      });
    }
    if (progressed) continue;
    if (!computed) {
      compute?.(values);
      computed = true;
      continue;
    }
    const left = plan.ranks.some((rp) => rp.streams.some((ops, s) => next[rp.rank]![s]! < ops.length));
    if (left)
      throw new FrontendError(
        "execution",
        `plan ${plan.name} stalls: some ops never become ready (a dependency cycle or an unmatched collective)`,
      );
    return;
  }
}

function collectivePeers(plan: ChunkPlan, op: CollectiveOp, seq: number, seqOf: Map<string, number>, next: number[][]): Node[] | undefined {
  const out: Node[] = [];
  for (const q of op.ranks) {
    const rp = plan.ranks[q];
    let found: Node | undefined;
    rp?.streams.forEach((ops, s) => {
      const i = next[q]![s]!;
      const o = ops[i];
      if (o?.kind === "collective" && o.ranks.join(",") === op.ranks.join(",") && seqOf.get(`${q}/${s}/${i}`) === seq)
        found = { rank: q, stream: s, index: i, op: o };
    });
    if (found === undefined) return undefined;
    out.push(found);
  }
  return out;
}

function runCollective(
  nodes: readonly Node[],
  read: (r: number, region: Region) => number[],
  write: (r: number, region: Region, data: readonly number[], reduce?: Reduction) => void,
): void {
  const ops = nodes.map((n) => n.op as CollectiveOp);
  const first = ops[0]!;
  const n = ops.length;
  const slabs = (region: Region, parts: number): Region[] =>
    Array.from({ length: parts }, (_, j) => {
      const size = region.sizes[first.axis]! / parts;
      const offsets = [...region.offsets];
      offsets[first.axis] = offsets[first.axis]! + j * size;
      const sizes = [...region.sizes];
      sizes[first.axis] = size;
      return { tensor: region.tensor, offsets, sizes };
    });
  const srcs = nodes.map((nd, i) => read(nd.rank, ops[i]!.src));
  nodes.forEach((nd, i) => {
    const op = ops[i]!;
    if (op.collective === "all-gather") {
      slabs(op.dst, n).forEach((slab, j) => write(nd.rank, slab, srcs[j]!));
    } else if (op.collective === "all-reduce") {
      const acc = srcs.reduce((a, s) => a.map((v, k) => (op.reduce === "max" ? Math.max(v, s[k]!) : v + s[k]!)));
      write(nd.rank, op.dst, acc);
    } else if (op.collective === "reduce-scatter") {
      const mine = nodes.map((m, j) => read(m.rank, slabs(ops[j]!.src, n)[i]!));
      write(
        nd.rank,
        op.dst,
        mine.reduce((a, s) => a.map((v, k) => (op.reduce === "max" ? Math.max(v, s[k]!) : v + s[k]!))),
      );
    } else {
      nodes.forEach((m, j) => write(nd.rank, slabs(op.dst, n)[j]!, read(m.rank, slabs(ops[j]!.src, n)[i]!)));
    }
  });
}
