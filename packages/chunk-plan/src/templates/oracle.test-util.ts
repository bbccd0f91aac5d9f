// An element-wise reference executor the template tests check plans against, independent
// of the validate module: every element carries (set of contributing ranks, element it
// came from); ops run in one order consistent with the plan, and every read must come
// after the writes of what it reads in every order (happens-before), not just this one.
import type { ChunkPlan, Op, Region } from "../model/schema.js";
import { opAccesses } from "../plan/access.js";

/** The value of one element: which ranks' partials it sums, and where it started. */
export interface Cell {
  mask: number;
  pos: number;
}

/** Row-major flat indices of `region`'s elements within a tensor of `shape`, in region order. */
export function elements(region: Region, shape: readonly number[]): number[] {
  let flat: number[] = [0];
  region.sizes.forEach((size, d) => {
    const next: number[] = [];
    for (const f of flat) for (let k = 0; k < size; k++) next.push(f * shape[d]! + region.offsets[d]! + k);
    flat = next;
  });
  return flat;
}

/** Final buffers: `state.get(rank + "|" + tensor)[element]`, undefined where never valid. */
export type State = Map<string, (Cell | undefined)[]>;

/**
 * Runs `plan` (p2p and local-copy ops only) in a topological order of stream order and
 * dependencies. Throws when a read is not ordered after the writer of an element it reads
 * (or reads an invalid element), when a write is not ordered after an earlier read of its
 * element, when an element gets two plain writes, or when a reduction mixes different
 * elements or counts a rank twice.
 */
export function runPlan(plan: ChunkPlan): State {
  const shape = new Map(plan.tensors.map((t) => [t.name, t.shape]));
  const nodes: { r: number; s: number; i: number; op: Op }[] = [];
  const id = plan.ranks.map((rp) => rp.streams.map((ops) => ops.map(() => -1)));
  plan.ranks.forEach((rp, r) => rp.streams.forEach((ops, s) => ops.forEach((op, i) => (id[r]![s]![i] = nodes.push({ r, s, i, op }) - 1))));
  const preds: number[][] = nodes.map(({ r, s, i, op }) => [
    ...(i > 0 ? [id[r]![s]![i - 1]!] : []),
    ...op.deps.flatMap((d) => (d.kind === "op" ? [id[d.rank]![d.stream]![d.index]!] : [])),
  ]);
  // Ancestor sets (happens-before), in topological order.
  const order: number[] = [];
  const indeg = preds.map((p) => p.length);
  const succ: number[][] = nodes.map(() => []);
  preds.forEach((ps, n) => ps.forEach((p) => succ[p]!.push(n)));
  const ready = nodes.map((_, n) => n).filter((n) => indeg[n] === 0);
  while (ready.length > 0) {
    const n = ready.shift()!;
    order.push(n);
    for (const m of succ[n]!) if (--indeg[m]! === 0) ready.push(m);
  }
  if (order.length !== nodes.length) throw new Error("dependency cycle");
  const before: Set<number>[] = nodes.map(() => new Set());
  for (const n of order)
    for (const p of preds[n]!) {
      before[n]!.add(p);
      for (const a of before[p]!) before[n]!.add(a);
    }

  const state: State = new Map();
  const writer = new Map<string, unknown[]>();
  const readers = new Map<string, unknown[]>();
  const buffer = (rank: number, tensor: string, map: Map<string, unknown[]>): unknown[] => {
    const key = `${rank}|${tensor}`;
    let b = map.get(key);
    if (b === undefined) {
      b = new Array(shape.get(tensor)!.reduce((a, x) => a * x, 1)).fill(undefined);
      map.set(key, b);
    }
    return b;
  };
  plan.ranks.forEach((rp, r) =>
    rp.local.forEach((region) => {
      const b = buffer(r, region.tensor, state);
      for (const e of elements(region, shape.get(region.tensor)!)) b[e] = { mask: 1 << r, pos: e };
    }),
  );
  for (const n of order) {
    const { r, op } = nodes[n]!;
    if (op.kind === "collective") throw new Error("the reference executor runs no collectives");
    const [read, write] = opAccesses(op, r);
    const srcEls = elements(read.region, shape.get(read.region.tensor)!);
    const dstEls = elements(write.region, shape.get(write.region.tensor)!);
    if (srcEls.length !== dstEls.length) throw new Error(`op r${r}#${nodes[n]!.i} moves regions of different sizes`);
    const src = buffer(read.rank, read.region.tensor, state) as (Cell | undefined)[];
    const srcWriters = buffer(read.rank, read.region.tensor, writer) as (number[] | undefined)[];
    const dst = buffer(write.rank, write.region.tensor, state) as (Cell | undefined)[];
    const dstWriters = buffer(write.rank, write.region.tensor, writer) as (number[] | undefined)[];
    const srcReaders = buffer(read.rank, read.region.tensor, readers) as (number[] | undefined)[];
    const dstReaders = buffer(write.rank, write.region.tensor, readers) as (number[] | undefined)[];
    const values = srcEls.map((e) => {
      srcReaders[e] = [...(srcReaders[e] ?? []), n];
      const v = src[e];
      if (v === undefined) throw new Error(`r${r}: reads invalid element ${e} of ${read.region.tensor} on r${read.rank}`);
      for (const w of srcWriters[e] ?? []) {
        if (!before[n]!.has(w))
          throw new Error(`r${r}: reads element ${e} of ${read.region.tensor} on r${read.rank} not ordered after its writer`);
      }
      return v;
    });
    dstEls.forEach((e, k) => {
      const v = values[k]!;
      const old = dst[e];
      if (op.reduce !== undefined) {
        if (old === undefined) throw new Error(`r${r}: reduces into invalid element ${e}`);
        if (old.pos !== v.pos) throw new Error(`r${r}: reduces element ${v.pos} into element ${old.pos}`);
        if ((old.mask & v.mask) !== 0) throw new Error(`r${r}: counts a rank twice at element ${e}`);
        dst[e] = { mask: old.mask | v.mask, pos: v.pos };
      } else {
        if ((dstWriters[e] ?? []).length > 0) {
          throw new Error(`r${r}: writes element ${e} of ${write.region.tensor} on r${write.rank} twice`);
        }
        dst[e] = { ...v };
      }
      for (const reader of dstReaders[e] ?? []) {
        if (reader !== n && !before[n]!.has(reader))
          throw new Error(
            `r${r}: overwrites element ${e} of ${write.region.tensor} on r${write.rank} while r${nodes[reader]!.r} may still read it`,
          );
      }
      dstWriters[e] = [...(dstWriters[e] ?? []), n];
    });
  }
  return state;
}
