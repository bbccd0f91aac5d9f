// Phase 2 of validation: writes. Every destination atom is written by at most one op per
// rank (reductions aside, which symbolic execution checks by contributor), and when the
// plan claims a collective, every element of its result is either held at start or written.
import { mergeAtoms, type AtomGrid } from "../region/atoms.js";
import { formatRegion } from "../region/box.js";
import type { Buffers } from "./buffers.js";
import type { ClaimTargets } from "./claim.js";
import { type Findings, PlanValidationError, formatOp } from "./errors.js";
import { AtomList, type PlanAtoms } from "./plan-atoms.js";
import { opRef, writtenPart, type PlanIndex } from "./plan-index.js";

/** Marks local atoms and records the writer(s) of every atom; reports duplicated writes. */
export function recordWrites(index: PlanIndex, atoms: PlanAtoms, buffers: Buffers, out: Findings): void {
  const list = new AtomList(atoms);
  for (const rp of index.plan.ranks) {
    for (const region of rp.local) {
      const { indices, count, tensor } = list.load(region);
      const local = buffers.get(rp.rank, tensor).local;
      for (let k = 0; k < count; k++) local[indices[k] as number] = 1;
    }
  }
  const reported = new Set<string>();
  for (let o = 0; o < index.ops.length; o++) {
    const rank = index.writeRank[o]!;
    const { indices, count, tensor } = list.loadOp(o, 1);
    const buffer = buffers.get(rank, tensor);
    if (index.reduces[o] === 1) {
      for (let k = 0; k < count; k++) {
        const f = indices[k] as number;
        const reducers = buffer.reducers.get(f);
        if (reducers === undefined) buffer.reducers.set(f, [o]);
        else if (reducers[reducers.length - 1] !== o) reducers.push(o);
      }
      continue;
    }
    let clash = -1;
    const writer = buffer.writer;
    for (let k = 0; k < count; k++) {
      const f = indices[k] as number;
      const prev = (writer[f] as number) - 1;
      if (prev < 0) writer[f] = o + 1;
      else if (prev !== o && clash < 0) clash = prev;
    }
    if (clash < 0) continue;
    const key = `${clash}|${o}|${rank}`;
    if (reported.has(key)) continue;
    reported.add(key);
    const op = index.ops[o]!;
    const region = writtenPart(index, clash, rank, op.dst);
    const ref = opRef(index, o);
    out.add(
      new PlanValidationError(
        "duplicate-write",
        `${formatOp(ref)} writes ${formatRegion(region)} on rank ${rank}, which ${formatOp(opRef(index, clash))} already writes; each destination element must be written exactly once`,
        { ...ref, region },
      ),
    );
  }
}

/** Reports the parts of a claimed result that no rank holds at start and no op writes. */
export function checkMissing(atoms: PlanAtoms, buffers: Buffers, claim: ClaimTargets, collective: string, out: Findings): void {
  // Atoms per target id (see ClaimVisitor): AllGather checks one slab on every rank.
  const cache: ({ indices: Int32Array; tensor: number } | undefined)[] = [];
  const list = new AtomList(atoms);
  claim((rank, target, _sources, _reduce, id) => {
    if (out.full) return;
    let hit = cache[id];
    if (hit === undefined) {
      list.load(target);
      cache[id] = hit = { indices: list.indices.slice(0, list.count), tensor: list.tensor };
    }
    const { indices, tensor } = hit;
    const { local, writer, reducers } = buffers.get(rank, tensor);
    let missing = false;
    for (let k = 0; k < indices.length && !missing; k++) {
      const f = indices[k] as number;
      missing = local[f] !== 1 && writer[f] === 0 && !reducers.has(f);
    }
    if (!missing) return;
    const grid = atoms.grids[tensor] as AtomGrid;
    const inTarget = new Uint8Array(grid.size);
    for (const f of indices) inTarget[f] = 1;
    const gap = (f: number): boolean => inTarget[f] === 1 && local[f] !== 1 && writer[f] === 0 && !reducers.has(f);
    for (const region of mergeAtoms(grid, target.tensor, gap, 4)) {
      out.add(
        new PlanValidationError(
          "missing-write",
          `rank ${rank}: ${formatRegion(region)} is part of the ${collective} result but no op writes it there and the rank does not hold it at start`,
          { rank, region },
        ),
      );
    }
  });
}
