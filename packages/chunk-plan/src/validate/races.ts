// Phase 3b of validation: data races. An op that reads atoms on a rank must happen after
// every op that writes them there; where the rank held the atoms at start, the read only
// needs to be ordered with each write (before or after). Two writers of one atom, one
// plain and one reducing, must be ordered too.
import { formatRegion } from "../region/box.js";
import { type Buffers, held } from "./buffers.js";
import { type Findings, PlanValidationError, formatOp } from "./errors.js";
import { Reachability, type HbGraph } from "./graph.js";
import { AtomList, type PlanAtoms } from "./plan-atoms.js";
import { opRef, writtenPart, type PlanIndex } from "./plan-index.js";

/** Runs the race check over an acyclic graph. */
export function checkRaces(index: PlanIndex, atoms: PlanAtoms, buffers: Buffers, graph: HbGraph, out: Findings): void {
  const reach = new Reachability(graph);
  const ordered = (a: number, b: number): boolean => reach.happensBefore(a, b) || reach.happensBefore(b, a);
  const nodeOf = index.nodeOf;
  const writers = new ReadWriters(index);
  const list = new AtomList(atoms);
  for (let o = 0; o < index.ops.length && !out.full; o++) {
    const node = nodeOf[o]!;
    const rank = index.readRank[o]!;
    const { indices, count, tensor } = list.loadOp(o, 0);
    const buffer = buffers.get(rank, tensor);
    const { local, writer, reducers } = buffer;
    const anyReducers = reducers.size > 0;
    writers.start(o);
    let unwritten = false;
    // Runs of atoms share their writer (an op writes a range): each (writer, strict) once.
    let lastW = -1;
    let lastStrict = false;
    for (let k = 0; k < count; k++) {
      const f = indices[k] as number;
      const strict = !held(local, f);
      const w = (writer[f] as number) - 1;
      if (w >= 0 && nodeOf[w] !== node && (w !== lastW || (strict && !lastStrict))) {
        writers.note(w, strict);
        lastStrict = (w === lastW && lastStrict) || strict;
        lastW = w;
      }
      const rs = anyReducers ? reducers.get(f) : undefined;
      if (rs !== undefined) {
        for (const r of rs) if (nodeOf[r] !== node) writers.note(r, strict);
      } else if (w < 0 && strict) unwritten = true;
    }
    if (writers.size === 0 && !unwritten) continue;
    if (!unwritten && writers.allOrdered(reach, node)) continue;
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
    for (let i = 0; i < writers.size; i++) {
      const w = writers.ids[i]!;
      const strict = writers.strictAt(i);
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

/** Writers listed by scanning the list itself; past this many, by marks per op id. */
const SCAN_LIMIT = 16;

/**
 * The writer ops of the atoms one op reads, in first-seen order (`ids[0 .. size)`), each
 * with a flag ({@link ReadWriters.strictAt}): strict when some atom it wrote is read without
 * being held at start (the read must follow the write), else the read need only be ordered
 * with it. An op reads the writes of a few ops, found by scanning the list; an op with more
 * writers switches to marks per op id (`seenBy[w] = o + 1`), allocated on first need.
 */
class ReadWriters {
  ids = new Int32Array(SCAN_LIMIT);
  size = 0;
  private strict = new Uint8Array(SCAN_LIMIT);
  private seenBy: Int32Array | undefined;
  private strictOf: Uint8Array | undefined;
  private marked = false;
  /** Per chain: the latest strict writer of the current op on it (valid where `chainSeen` = op + 1). */
  private readonly chainLast: Int32Array;
  private readonly chainSeen: Int32Array;
  private readonly chains: Int32Array;
  private op = 0;

  constructor(private readonly index: PlanIndex) {
    const chains = index.chainRank.length;
    this.chainLast = new Int32Array(chains);
    this.chainSeen = new Int32Array(chains);
    this.chains = new Int32Array(chains);
  }

  /** Starts the list of op `o`. */
  start(o: number): void {
    this.op = o;
    this.size = 0;
    this.marked = false;
  }

  note(w: number, strict: boolean): void {
    if (!this.marked) {
      for (let i = 0; i < this.size; i++) {
        if (this.ids[i] === w) {
          if (strict) this.strict[i] = 1;
          return;
        }
      }
      if (this.size < SCAN_LIMIT) {
        this.strict[this.size] = strict ? 1 : 0;
        this.ids[this.size++] = w;
        return;
      }
      this.mark();
    }
    const seenBy = this.seenBy!;
    const strictOf = this.strictOf!;
    if (seenBy[w] !== this.op + 1) {
      seenBy[w] = this.op + 1;
      strictOf[w] = 0;
      if (this.size === this.ids.length) {
        const more = new Int32Array(this.ids.length * 2);
        more.set(this.ids);
        this.ids = more;
      }
      this.ids[this.size++] = w;
    }
    if (strict) strictOf[w] = 1;
  }

  /** Moves the list so far to the marks per op id. */
  private mark(): void {
    const ops = this.index.ops.length;
    const seenBy = (this.seenBy ??= new Int32Array(ops));
    const strictOf = (this.strictOf ??= new Uint8Array(ops));
    for (let i = 0; i < this.size; i++) {
      const w = this.ids[i]!;
      seenBy[w] = this.op + 1;
      strictOf[w] = this.strict[i]!;
    }
    this.marked = true;
  }

  /** True when the writer at position `i` of the list is strict. */
  strictAt(i: number): boolean {
    return (this.marked ? this.strictOf![this.ids[i]!] : this.strict[i]) === 1;
  }

  /**
   * True when every listed writer is ordered as the race check needs with `node`, the
   * reader's graph node. A strict writer that is an op (not a collective) runs in its
   * chain's order, so only the latest strict writer of each chain is asked whether it
   * happens before the reader: the earlier ones precede it. False means some writer may
   * be unordered: the caller then checks (and reports) writer by writer.
   */
  allOrdered(reach: Reachability, node: number): boolean {
    const { nodeOf, opChain } = this.index;
    const mark = this.op + 1;
    let groups = 0;
    for (let i = 0; i < this.size; i++) {
      const w = this.ids[i]!;
      const wn = nodeOf[w]!;
      const strict = this.strictAt(i);
      if (strict && wn === w) {
        const c = opChain[w]!;
        if (this.chainSeen[c] !== mark) {
          this.chainSeen[c] = mark;
          this.chainLast[c] = w;
          this.chains[groups++] = c;
        } else if (w > this.chainLast[c]!) this.chainLast[c] = w;
        continue;
      }
      if (!(reach.happensBefore(wn, node) || (!strict && reach.happensBefore(node, wn)))) return false;
    }
    for (let g = 0; g < groups; g++) if (!reach.happensBefore(this.chainLast[this.chains[g]!]!, node)) return false;
    return true;
  }
}
