// Phase 2 of validation: writes. Every destination atom is written by at most one op per
// rank (reductions aside, which symbolic execution checks by contributor), and when the
// plan claims a collective, every element of its result is either held at start or written.
import { mergeAtoms, type AtomGrid } from "../region/atoms.js";
import { formatRegion } from "../region/box.js";
import type { Region } from "../model/schema.js";
import { type Buffer, type Buffers, held, markHeld } from "./buffers.js";
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
      for (let k = 0; k < count; k++) markHeld(local, indices[k] as number);
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

/** The atoms of one claim target, cached per target id. */
export interface TargetAtoms {
  readonly indices: Int32Array;
  readonly tensor: number;
}

/** The atoms of `target`, copied out of `list`'s reused buffer. */
export function targetAtoms(list: AtomList, target: Region): TargetAtoms {
  list.load(target);
  return { indices: list.indices.slice(0, list.count), tensor: list.tensor };
}

/**
 * Reports the parts of a claimed result that no rank holds at start and no op writes. The
 * visitor runs once per (rank, target), 10^6 times for an AllGather of a thousand ranks:
 * it reads typed arrays only, and the report is built apart, so a call allocates nothing.
 */
export function checkMissing(atoms: PlanAtoms, buffers: Buffers, claim: ClaimTargets, collective: string, out: Findings): void {
  // Atoms per target id (see ClaimVisitor): AllGather checks one slab on every rank.
  const cache: (TargetAtoms | undefined)[] = [];
  const list = new AtomList(atoms);
  claim((rank, target, _sources, _reduce, id) => {
    if (out.full) return;
    const hit = (cache[id] ??= targetAtoms(list, target));
    const buffer = buffers.get(rank, hit.tensor);
    if (anyMissing(hit.indices, buffer)) reportMissing(atoms, buffer, rank, target, hit, collective, out);
  });
}

function anyMissing(indices: Int32Array, buffer: Buffer): boolean {
  const { local, writer, reducers } = buffer;
  const anyReducers = reducers.size > 0;
  for (let k = 0; k < indices.length; k++) {
    const f = indices[k]!;
    if (!held(local, f) && writer[f] === 0 && !(anyReducers && reducers.has(f))) return true;
  }
  return false;
}

function reportMissing(
  atoms: PlanAtoms,
  buffer: Buffer,
  rank: number,
  target: Region,
  hit: TargetAtoms,
  collective: string,
  out: Findings,
): void {
  const { local, writer, reducers } = buffer;
  const grid = atoms.grids[hit.tensor] as AtomGrid;
  const inTarget = new Uint8Array(grid.size);
  for (const f of hit.indices) inTarget[f] = 1;
  const gap = (f: number): boolean => inTarget[f] === 1 && !held(local, f) && writer[f] === 0 && !reducers.has(f);
  for (const region of mergeAtoms(grid, target.tensor, gap, 4)) {
    out.add(
      new PlanValidationError(
        "missing-write",
        `rank ${rank}: ${formatRegion(region)} is part of the ${collective} result but no op writes it there and the rank does not hold it at start`,
        { rank, region },
      ),
    );
  }
}
