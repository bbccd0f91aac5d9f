// Reference copy (test oracle): the validator as it was before its per-op arrays, region
// interning and CSR rewrite, kept so a property test can check that the fast path reports
// exactly what this straightforward version reports. Not part of the package's surface.
// Phase 3b of validation: data races. An op that reads atoms on a rank must happen after
// every op that writes them there; where the rank held the atoms at start, the read only
// needs to be ordered with each write (before or after). Two writers of one atom, one
// plain and one reducing, must be ordered too.
import { formatRegion } from "../../region/box.js";
import type { Buffers } from "./buffers.js";
import { type Findings, PlanValidationError, formatOp } from "../errors.js";
import { Reachability, type HbGraph } from "./graph.js";
import { AtomList, type PlanAtoms } from "./plan-atoms.js";
import { opRef, readRank, writtenPart, type PlanIndex } from "./plan-index.js";

/** Runs the race check over an acyclic graph. */
export function checkRaces(index: PlanIndex, atoms: PlanAtoms, buffers: Buffers, graph: HbGraph, out: Findings): void {
  const reach = new Reachability(graph, index);
  const ordered = (a: number, b: number): boolean => reach.happensBefore(a, b) || reach.happensBefore(b, a);
  // writer op -> true when some atom it wrote is read here without being held at start
  const writers = new Map<number, boolean>();
  const list = new AtomList(atoms);
  for (let o = 0; o < index.ops.length && !out.full; o++) {
    const node = index.nodeOf[o] ?? 0;
    const op = index.ops[o]!;
    const rank = readRank(index.opRank[o] ?? 0, op);
    const { indices, count, tensor } = list.load(op.src);
    const buffer = buffers.get(rank, tensor);
    writers.clear();
    let unwritten = false;
    for (let k = 0; k < count; k++) {
      const f = indices[k] as number;
      const strict = buffer.local[f] !== 1;
      const w = (buffer.writer[f] as number) - 1;
      if (w >= 0 && index.nodeOf[w] !== node) writers.set(w, strict || writers.get(w) === true);
      const reducers = buffer.reducers.get(f);
      if (reducers !== undefined) {
        for (const r of reducers) if (index.nodeOf[r] !== node) writers.set(r, strict || writers.get(r) === true);
      } else if (w < 0 && strict) unwritten = true;
    }
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
    for (const [w, strict] of writers) {
      const wn = index.nodeOf[w] ?? 0;
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
