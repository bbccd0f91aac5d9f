// Phase 4 of validation: symbolic execution (AutoOverlap §5.1: "symbolic execution of the
// plan yields exactly the collective it claims"). Each rank's local atoms start as "the
// initial contents of rank r"; ops run in a topological order of the happens-before
// graph, moving and combining values per atom; the claimed result is then compared atom
// by atom with what the collective must produce.
import type { CollectiveOp, Op, Reduction, Region } from "../model/schema.js";
import { mergeAtoms, type AtomGrid } from "../region/atoms.js";
import { formatRegion } from "../region/box.js";
import type { Buffers } from "./buffers.js";
import type { ClaimSource, ClaimTargets } from "./claim.js";
import { type Findings, PlanValidationError, formatOp } from "./errors.js";
import type { HbGraph } from "./graph.js";
import { AtomList, type PlanAtoms } from "./plan-atoms.js";
import { opRank, opRef, slab, type PlanIndex } from "./plan-index.js";
import { UNWRITTEN, type ValueTable } from "./values.js";
import { targetAtoms, type TargetAtoms } from "./writes.js";

/** Values of a region's atoms on a rank (row-major over its atom box), with where they came from. */
interface Read {
  values: Int32Array;
  offsets: readonly number[];
}

class Machine {
  /** Set by `write` when a reduction combined some contribution a second time. */
  repeated = false;
  private readonly from: AtomList;
  private readonly to: AtomList;

  constructor(
    readonly atoms: PlanAtoms,
    readonly buffers: Buffers,
    readonly table: ValueTable,
  ) {
    this.from = new AtomList(atoms);
    this.to = new AtomList(atoms);
  }

  read(rank: number, region: Region): Read {
    const { indices, count, tensor } = this.from.load(region);
    const buffer = this.buffers.get(rank, tensor).values;
    const values = new Int32Array(count);
    for (let k = 0; k < count; k++) values[k] = buffer[indices[k] as number] as number;
    return { values, offsets: region.offsets };
  }

  /** Values moved from where they were read to `region`'s place. */
  moved(src: Read, region: Region): Int32Array {
    const delta = region.offsets.map((o, d) => o - (src.offsets[d] ?? 0));
    if (delta.every((d) => d === 0)) return src.values;
    const memo = new Map<number, number>();
    return src.values.map((v) => {
      let t = memo.get(v);
      if (t === undefined) memo.set(v, (t = this.table.translate(v, delta)));
      return t;
    });
  }

  write(rank: number, region: Region, values: Int32Array, reduce: Reduction | undefined): void {
    const { indices, count, tensor } = this.to.load(region);
    const buffer = this.buffers.get(rank, tensor).values;
    for (let k = 0; k < count; k++) this.store(buffer, indices[k] as number, values[k] ?? UNWRITTEN, reduce);
  }

  private store(buffer: Int32Array, f: number, v: number, reduce: Reduction | undefined): void {
    if (reduce === undefined) {
      buffer[f] = v;
      return;
    }
    const next = this.table.combine(reduce, buffer[f] ?? UNWRITTEN, v);
    if (this.table.repeats(next)) this.repeated = true;
    buffer[f] = next;
  }

  /**
   * Op `o`, a p2p transfer or local copy: the hot path, without intermediate arrays. Its
   * regions come from the precomputed atom boxes; the op object is read only when the copy
   * moves values to another place (`moved`), for the shift.
   */
  copy(o: number, op: Op, fromRank: number, toRank: number, moved: boolean, reduce: Reduction | undefined): void {
    const boxes = this.atoms.boxes;
    const from = boxes.side[2 * o]!;
    const to = boxes.side[2 * o + 1]!;
    const fromStart = boxes.first[from]!;
    const toStart = boxes.first[to]!;
    if (!moved && reduce === undefined && fromStart >= 0 && toStart >= 0) {
      // Both boxes are one range of atom ids and values stay in place (the usual chunk copy).
      const input = this.buffers.get(fromRank, boxes.tensor[from]!).values;
      const output = this.buffers.get(toRank, boxes.tensor[to]!).values;
      const count = boxes.count[from]!;
      for (let k = 0; k < count; k++) output[toStart + k] = input[fromStart + k]!;
      return;
    }
    const a = this.from.loadOp(o, 0);
    const b = this.to.loadOp(o, 1);
    const input = this.buffers.get(fromRank, a.tensor).values;
    const output = this.buffers.get(toRank, b.tensor).values;
    const delta = moved ? op.dst.offsets.map((x, d) => x - (op.src.offsets[d] as number)) : undefined;
    let lastIn = -1;
    let lastOut = UNWRITTEN;
    for (let k = 0; k < a.count; k++) {
      let v = input[a.indices[k] as number] as number;
      if (delta !== undefined) {
        if (v !== lastIn) {
          lastIn = v;
          lastOut = this.table.translate(v, delta);
        }
        v = lastOut;
      }
      this.store(output, b.indices[k] as number, v, reduce);
    }
  }

  sum(parts: Int32Array[], op: Reduction): Int32Array {
    const first = parts[0] ?? new Int32Array(0);
    return first.map((_, k) => {
      let acc = first[k] ?? UNWRITTEN;
      for (let j = 1; j < parts.length; j++) acc = this.table.combine(op, acc, parts[j]?.[k] ?? UNWRITTEN);
      return acc;
    });
  }
}

function runCollective(m: Machine, index: PlanIndex, members: number[]): void {
  const ops = members.map((o) => index.ops[o] as CollectiveOp);
  const ranks = members.map((o) => opRank(index, o));
  const first = ops[0] as CollectiveOp;
  const n = ops.length;
  const ax = first.axis;
  const op = first.reduce ?? "sum";
  // Every participant's input is read before any output is written (in-place collectives).
  const writes: { rank: number; region: Region; values: Int32Array }[] = [];
  ops.forEach((oi, i) => {
    const rank = ranks[i] ?? 0;
    switch (first.collective) {
      case "all-gather":
        ops.forEach((oj, j) => {
          const dst = slab(oi.dst, n, j, ax);
          writes.push({ rank, region: dst, values: m.moved(m.read(ranks[j] ?? 0, oj.src), dst) });
        });
        break;
      case "reduce-scatter":
        writes.push({
          rank,
          region: oi.dst,
          values: m.sum(
            ops.map((oj, j) => m.moved(m.read(ranks[j] ?? 0, slab(oj.src, n, i, ax)), oi.dst)),
            op,
          ),
        });
        break;
      case "all-reduce":
        writes.push({
          rank,
          region: oi.dst,
          values: m.sum(
            ops.map((oj, j) => m.moved(m.read(ranks[j] ?? 0, oj.src), oi.dst)),
            op,
          ),
        });
        break;
      case "all-to-all":
        ops.forEach((oj, j) => {
          const dst = slab(oi.dst, n, j, ax);
          writes.push({ rank, region: dst, values: m.moved(m.read(ranks[j] ?? 0, slab(oj.src, n, i, ax)), dst) });
        });
        break;
    }
  });
  for (const w of writes) m.write(w.rank, w.region, w.values, undefined);
}

/**
 * Runs the plan symbolically in `graph.order`, leaving each atom's value in `buffers`.
 * A reduction that combines one contribution twice is reported (`duplicate-write`) even
 * where the claim never looks, since the buffer it corrupts may be read by the caller.
 */
export function execute(index: PlanIndex, atoms: PlanAtoms, buffers: Buffers, graph: HbGraph, table: ValueTable, out: Findings): void {
  const m = new Machine(atoms, buffers, table);
  const list = new AtomList(atoms);
  for (const rp of index.plan.ranks) {
    for (const region of rp.local) {
      const { indices, count, tensor } = list.load(region);
      const values = buffers.get(rp.rank, tensor).values;
      const start = table.init(
        rp.rank,
        tensor,
        region.offsets.map(() => 0),
      );
      for (let k = 0; k < count; k++) values[indices[k] as number] = start;
    }
  }
  const hasInstances = index.instances.size > 0;
  const moved = atoms.moved;
  for (let k = 0; k < graph.order.length; k++) {
    const node = graph.order[k]!;
    const members = hasInstances ? index.instances.get(node) : undefined;
    if (members !== undefined) {
      runCollective(m, index, members);
      continue;
    }
    if (index.collective[node] === 1) continue; // unreachable: every collective belongs to an instance
    const op = index.ops[node]!;
    // A local copy reads and writes here, a push writes on its peer, a pull reads there.
    const from = index.readRank[node]!;
    const to = index.writeRank[node]!;
    m.repeated = false;
    m.copy(node, op, from, to, moved[node] === 1, index.reduces[node] === 1 ? op.reduce : undefined);
    if (m.repeated) {
      const ref = opRef(index, node);
      out.add(
        new PlanValidationError(
          "duplicate-write",
          `${formatOp(ref)} reduces into ${formatRegion(op.dst)} on rank ${to} a contribution that region already holds; each contributor must be combined exactly once`,
          { ...ref, region: op.dst },
        ),
      );
    }
  }
}

/**
 * Compares every claimed target with its expected value; reports what is held instead. As
 * in `checkMissing`, the per-(rank, target) visitor reads typed arrays only and builds
 * nothing: expected values and atoms are memoised per target id (same region, same
 * sources: AllGather checks slab j against rank j's shard on every rank), reports apart.
 */
export function checkClaim(
  atoms: PlanAtoms,
  buffers: Buffers,
  table: ValueTable,
  claim: ClaimTargets,
  collective: string,
  reduce: Reduction,
  out: Findings,
): void {
  const cache: (TargetAtoms | undefined)[] = [];
  const list = new AtomList(atoms);
  const expectedOf: (number | undefined)[] = [];
  claim((rank, target, sources, reduced, id) => {
    if (out.full) return;
    const expected = (expectedOf[id] ??= expectedValue(atoms, table, target, sources, reduced, reduce));
    const hit = (cache[id] ??= targetAtoms(list, target));
    const values = buffers.get(rank, hit.tensor).values;
    const indices = hit.indices;
    for (let k = 0; k < indices.length; k++) {
      if (values[indices[k]!] !== expected) {
        reportMismatch(atoms, table, values, rank, target, hit, expected, collective, out);
        return;
      }
    }
  });
}

/** The value a target must hold: its one source's initial contents, or their reduction. */
function expectedValue(
  atoms: PlanAtoms,
  table: ValueTable,
  target: Region,
  sources: readonly ClaimSource[],
  reduced: boolean,
  reduce: Reduction,
): number {
  const terms = sources.map((s) =>
    table.init(
      s.rank,
      atoms.tensorId.get(s.region.tensor) ?? 0,
      target.offsets.map((o, d) => o - (s.region.offsets[d] ?? 0)),
    ),
  );
  return reduced ? table.reduced(reduce, terms) : (terms[0] ?? UNWRITTEN);
}

/** One report per distinct wrong value (up to 3), each as maximal boxes holding it. */
function reportMismatch(
  atoms: PlanAtoms,
  table: ValueTable,
  values: Int32Array,
  rank: number,
  target: Region,
  hit: TargetAtoms,
  want: number,
  collective: string,
  out: Findings,
): void {
  const names = atoms.decls.map((t) => t.name);
  const { indices, tensor } = hit;
  const grid = atoms.grids[tensor] as AtomGrid;
  const inTarget = new Uint8Array(grid.size);
  for (const f of indices) inTarget[f] = 1;
  const wrongValues: number[] = [];
  for (let k = 0; k < indices.length && wrongValues.length < 3; k++) {
    const v = values[indices[k] as number] as number;
    if (v !== want && !wrongValues.includes(v)) wrongValues.push(v);
  }
  for (const held of wrongValues) {
    for (const region of mergeAtoms(grid, target.tensor, (f) => inTarget[f] === 1 && values[f] === held, 2)) {
      out.add(
        new PlanValidationError(
          "claim-mismatch",
          `rank ${rank}: ${formatRegion(region)} holds ${table.describe(held, names)} but the ${collective} claim needs ${table.describe(want, names)}`,
          { rank, region },
        ),
      );
    }
  }
}
