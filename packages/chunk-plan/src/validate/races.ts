// Phase 3b of validation: data races. An op that reads atoms on a rank must happen after
// every op that writes them there; where the rank held the atoms at start, the read only
// needs to be ordered with each write (before or after). Two writers of one atom, one
// plain and one reducing, must be ordered too.
import { formatRegion } from "../region/box.js";
import type { Buffers } from "./buffers.js";
import { type Findings, PlanValidationError, formatOp } from "./errors.js";
import { Reachability, type HbGraph } from "./graph.js";
import { AtomList, type PlanAtoms } from "./plan-atoms.js";
import { opRef, writtenPart, type PlanIndex } from "./plan-index.js";

/** Runs the race check over an acyclic graph. */
export function checkRaces(index: PlanIndex, atoms: PlanAtoms, buffers: Buffers, graph: HbGraph, out: Findings): void {
  const reach = new Reachability(graph, index);
  const ordered = (a: number, b: number): boolean => reach.happensBefore(a, b) || reach.happensBefore(b, a);
  const nodeOf = index.nodeOf;
  // The writer ops of the atoms op `o` reads, in first-seen order (`writers[0 .. nWriters)`),
  // each with a flag: true when some atom it wrote is read here without being held at start.
  // `seenBy[w] = o + 1` marks w as listed for o: no per-op map or allocation.
  const seenBy = new Int32Array(index.ops.length);
  const strictOf = new Uint8Array(index.ops.length);
  let writers = new Int32Array(16);
  let nWriters = 0;
  const note = (w: number, strict: boolean, o: number): void => {
    if (seenBy[w] !== o + 1) {
      seenBy[w] = o + 1;
      strictOf[w] = 0;
      if (nWriters === writers.length) {
        const more = new Int32Array(writers.length * 2);
        more.set(writers);
        writers = more;
      }
      writers[nWriters++] = w;
    }
    if (strict) strictOf[w] = 1;
  };
  const list = new AtomList(atoms);
  for (let o = 0; o < index.ops.length && !out.full; o++) {
    const node = nodeOf[o]!;
    const rank = index.readRank[o]!;
    const { indices, count, tensor } = list.loadOp(o, 0);
    const buffer = buffers.get(rank, tensor);
    const { local, writer, reducers } = buffer;
    const anyReducers = reducers.size > 0;
    nWriters = 0;
    let unwritten = false;
    for (let k = 0; k < count; k++) {
      const f = indices[k] as number;
      const strict = local[f] !== 1;
      const w = (writer[f] as number) - 1;
      if (w >= 0 && nodeOf[w] !== node) note(w, strict, o);
      const rs = anyReducers ? reducers.get(f) : undefined;
      if (rs !== undefined) {
        for (const r of rs) if (nodeOf[r] !== node) note(r, strict, o);
      } else if (w < 0 && strict) unwritten = true;
    }
    if (nWriters === 0 && !unwritten) continue;
    const op = index.ops[o]!;
    if (unwritten) {
      const ref = opRef(index, o);
      out.add(
        new PlanValidationError(
          "read-before-write",
          `${formatOp(ref)} reads ${formatRegion(op.src)} on rank ${rank}, part of which the rank neither holds at start (local) nor receives from any op`,
          { ...ref, region: op.src },
        ),
      );
    }
    for (let i = 0; i < nWriters; i++) {
      const w = writers[i]!;
      const strict = strictOf[w] === 1;
      const wn = nodeOf[w]!;
      if (reach.happensBefore(wn, node) || (!strict && reach.happensBefore(node, wn))) continue;
      const ref = opRef(index, o);
      const region = writtenPart(index, w, rank, op.src);
      out.add(
        new PlanValidationError(
          "read-before-write",
          `${formatOp(ref)} reads ${formatRegion(region)} on rank ${rank} but is not ordered after ${formatOp(opRef(index, w))}, which writes it; add a dependency on that op`,
          { ...ref, region },
        ),
      );
    }
  }
  const pairs = new Set<string>();
  for (const { rank, buffer } of buffers.touched()) {
    for (const [f, reducers] of buffer.reducers) {
      if (out.full) return;
      const w = (buffer.writer[f] ?? 0) - 1;
      if (w < 0) continue;
      for (const r of reducers) {
        const key = `${w}|${r}`;
        if (pairs.has(key)) continue;
        pairs.add(key);
        if (ordered(index.nodeOf[w] ?? 0, index.nodeOf[r] ?? 0)) continue;
        const ref = opRef(index, r);
        const region = writtenPart(index, w, rank, writtenPart(index, r, rank, index.ops[r]!.dst));
        out.add(
          new PlanValidationError(
            "write-race",
            `${formatOp(ref)} reduces into ${formatRegion(region)} on rank ${rank} unordered with ${formatOp(opRef(index, w))}, which overwrites it; order them with a dependency`,
            { ...ref, region },
          ),
        );
      }
    }
  }
}
