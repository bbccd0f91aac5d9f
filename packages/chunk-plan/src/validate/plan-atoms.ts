// The atom grid of every tensor of a plan: each axis is cut at every region boundary the
// plan uses, and cuts are carried across every copy (a translation), so a copy maps whole
// atoms onto whole atoms. Values, writers and coverage are then tracked per atom.
import type { CollectiveOp, Region, TensorDecl } from "../model/schema.js";
import { atomGrid, lowerBound, normaliseCuts, type AtomGrid } from "../region/atoms.js";
import type { ClaimTargets } from "./claim.js";
import { slab, type PlanIndex } from "./plan-index.js";

/** Atom grids per tensor, with tensor ids. */
export interface PlanAtoms {
  readonly tensorId: ReadonlyMap<string, number>;
  readonly decls: readonly TensorDecl[];
  readonly grids: readonly AtomGrid[];
  /**
   * Per tensor and axis, `at[p]` = index of cut point `p` among the grid's cuts, or -1 when
   * `p` is not a cut; undefined for an axis too long for a table (binary search there).
   */
  readonly cutIndex: readonly (readonly (Int32Array | undefined)[])[];
  /** The atom box of every op's `src` and `dst`, computed once (see {@link RegionTable}). */
  readonly boxes: RegionTable;
  /** 1 where an op's `dst` offsets differ from its `src` offsets (values move by the difference). */
  readonly moved: Uint8Array;
}

/**
 * The distinct boxes of the ops' regions, interned by value, and per op and side (`2 * op`
 * for `src`, `2 * op + 1` for `dst`) the id of its box. Per box: the tensor id and, once
 * {@link RegionTable.locate} ran, the atom index range `[lo, hi)` on each axis (`dims`
 * entries per box), the first flat atom id when the box is one row-major range of ids
 * (else -1), and its number of atoms. Later phases read these arrays instead of the op
 * objects, which for 10^5–10^6 ops lie scattered over the heap.
 */
export class RegionTable {
  /** Box id per op side. */
  readonly side: Int32Array;
  size = 0;
  tensor = new Int32Array(64);
  lo = new Int32Array(0);
  hi = new Int32Array(0);
  first = new Int32Array(0);
  count = new Int32Array(0);
  /** Per box: start and end of the box on each axis (stride `2 * dims`). */
  private bounds: Float64Array;
  /** Open-addressing hash of box ids (-1 = empty), capacity a power of two. */
  private slots = new Int32Array(256).fill(-1);

  constructor(
    readonly dims: number,
    sides: number,
  ) {
    this.side = new Int32Array(sides);
    this.bounds = new Float64Array(64 * 2 * dims);
  }

  /** The id of the box (`offsets`, `sizes`) of tensor `t`, added when new. */
  intern(t: number, offsets: readonly number[], sizes: readonly number[]): number {
    const dims = this.dims;
    const n = Math.min(offsets.length, dims);
    let h = t | 0;
    for (let d = 0; d < dims; d++) {
      const o = d < n ? offsets[d]! : 0;
      h = Math.imul(h ^ (o | 0), 0x9e3779b1);
      h = Math.imul(h ^ ((d < n ? o + sizes[d]! : 0) | 0), 0x85ebca6b);
    }
    const mask = this.slots.length - 1;
    let slot = (h ^ (h >>> 15)) & mask;
    const bounds = this.bounds;
    for (;;) {
      const id = this.slots[slot]!;
      if (id < 0) break;
      if (this.tensor[id] === t) {
        let same = true;
        const at = id * 2 * dims;
        for (let d = 0; d < dims && same; d++) {
          const o = d < n ? offsets[d]! : 0;
          const e = d < n ? o + sizes[d]! : 0;
          same = bounds[at + 2 * d] === o && bounds[at + 2 * d + 1] === e;
        }
        if (same) return id;
      }
      slot = (slot + 1) & mask;
    }
    const id = this.size++;
    if (id === this.tensor.length) {
      const tensor = new Int32Array(id * 2);
      tensor.set(this.tensor);
      this.tensor = tensor;
      const more = new Float64Array(id * 2 * 2 * dims);
      more.set(bounds);
      this.bounds = more;
    }
    this.tensor[id] = t;
    const at = id * 2 * dims;
    for (let d = 0; d < dims; d++) {
      const o = d < n ? offsets[d]! : 0;
      this.bounds[at + 2 * d] = o;
      this.bounds[at + 2 * d + 1] = d < n ? o + sizes[d]! : 0;
    }
    this.slots[slot] = id;
    if (this.size * 2 > this.slots.length) this.rehash();
    return id;
  }

  private rehash(): void {
    const old = this.slots;
    const slots = new Int32Array(old.length * 2).fill(-1);
    const mask = slots.length - 1;
    const dims = this.dims;
    for (let id = 0; id < this.size; id++) {
      let h = this.tensor[id]! | 0;
      const at = id * 2 * dims;
      for (let d = 0; d < dims; d++) {
        h = Math.imul(h ^ (this.bounds[at + 2 * d]! | 0), 0x9e3779b1);
        h = Math.imul(h ^ (this.bounds[at + 2 * d + 1]! | 0), 0x85ebca6b);
      }
      let slot = (h ^ (h >>> 15)) & mask;
      while (slots[slot] !== -1) slot = (slot + 1) & mask;
      slots[slot] = id;
    }
    this.slots = slots;
  }

  /** Finds every box's atoms once the cuts are final. */
  locate(
    grids: readonly AtomGrid[],
    cuts: readonly (readonly number[])[][],
    cutIndex: readonly (readonly (Int32Array | undefined)[])[],
    decls: readonly TensorDecl[],
  ): void {
    const dims = this.dims;
    const lo = (this.lo = new Int32Array(this.size * dims));
    const hi = (this.hi = new Int32Array(this.size * dims));
    const first = (this.first = new Int32Array(this.size));
    const count = (this.count = new Int32Array(this.size));
    const indexOf = (t: number, d: number, p: number): number => {
      const table = cutIndex[t]?.[d];
      if (table !== undefined) return table[p] ?? -1;
      const c = cuts[t]?.[d] ?? [];
      const k = lowerBound(c, p);
      return c[k] === p ? k : -1;
    };
    for (let id = 0; id < this.size; id++) {
      const t = this.tensor[id]!;
      const grid = grids[t];
      const axes = grid?.counts.length ?? 0;
      let total = 1;
      let base = 0;
      for (let d = 0; d < axes; d++) {
        const a = indexOf(t, d, this.bounds[id * 2 * dims + 2 * d]!);
        const b = indexOf(t, d, this.bounds[id * 2 * dims + 2 * d + 1]!);
        if (a < 0 || b < 0) throw new Error(`internal: an op region of ${decls[t]?.name} is not aligned to its atom grid`);
        lo[id * dims + d] = a;
        hi[id * dims + d] = b;
        total *= b - a;
        base += a * (grid?.strides[d] ?? 0);
      }
      count[id] = total;
      first[id] = grid !== undefined && isRange(grid, lo, hi, id * dims, axes) ? base : -1;
    }
  }
}

/** True when the box `[lo, hi)` (axes `at .. at + dims` of the arrays) is one range of flat ids. */
function isRange(grid: AtomGrid, lo: Int32Array, hi: Int32Array, at: number, dims: number): boolean {
  let d = 0;
  while (d < dims - 1 && hi[at + d]! - lo[at + d]! === 1) d++;
  for (let e = d + 1; e < dims; e++) if (lo[at + e] !== 0 || hi[at + e] !== grid.counts[e]) return false;
  return true;
}

/** Longest axis given a point table (cut marks while collecting, cut indices after): 16 MiB of Int32. */
const MAX_TABLE_EXTENT = 1 << 22;

/**
 * The cut points of one axis while they are collected: a mark per element position when
 * the axis is short enough, else a set. Every region of every op adds two points, so this
 * is the validator's hottest loop before the atoms exist.
 */
class AxisPoints {
  private readonly marks: Uint8Array | undefined;
  /** Points without a mark: all of them on a long axis, any outside `0 .. extent` otherwise. */
  private outside: Set<number> | undefined;

  constructor(private readonly extent: number) {
    this.marks = extent <= MAX_TABLE_EXTENT ? new Uint8Array(extent + 1) : undefined;
    this.add(0);
    this.add(extent);
  }

  /** Adds point `p`. */
  add(p: number): void {
    const marks = this.marks;
    if (marks !== undefined && p >= 0 && p <= this.extent && Number.isInteger(p)) marks[p] = 1;
    else (this.outside ??= new Set()).add(p);
  }

  /** The points, sorted and deduplicated. */
  sorted(): number[] {
    const extra = this.outside === undefined ? [] : [...this.outside];
    const marks = this.marks;
    if (marks === undefined) return normaliseCuts(extra);
    const out: number[] = [];
    for (let p = 0; p < marks.length; p++) if (marks[p] === 1) out.push(p);
    return extra.length === 0 ? out : normaliseCuts([...out, ...extra]);
  }
}

function cutIndexTable(cuts: readonly number[], extent: number): Int32Array | undefined {
  if (extent > MAX_TABLE_EXTENT) return undefined;
  const at = new Int32Array(extent + 1).fill(-1);
  for (let k = 0; k < cuts.length; k++) {
    const p = cuts[k]!;
    if (p >= 0 && p <= extent && Number.isInteger(p)) at[p] = k;
  }
  return at;
}

/** True when `a` and `b` are the same box of the same tensor. */
function sameBox(a: Region, b: Region): boolean {
  if (a.tensor !== b.tensor || a.offsets.length !== b.offsets.length || a.sizes.length !== b.sizes.length) return false;
  for (let d = 0; d < a.offsets.length; d++) if (a.offsets[d] !== b.offsets[d] || a.sizes[d] !== b.sizes[d]) return false;
  return true;
}

/** Rounds of cut propagation before a still-growing axis is cut at every element. */
const MAX_CUT_ROUNDS = 16;

/** A copy of `sizes` elements from `src` offsets in one tensor to `dst` offsets in another. */
interface Translation {
  src: number;
  dst: number;
  srcOff: readonly number[];
  dstOff: readonly number[];
  sizes: readonly number[];
}

/**
 * Every (src region → dst region) translation the plan performs, deduplicated. Ops whose
 * `translates` flag is 0 (same tensor, same place) are skipped without being read.
 */
function translations(index: PlanIndex, tensorId: ReadonlyMap<string, number>, translates: Uint8Array): Translation[] {
  const seen = new Set<string>();
  const out: Translation[] = [];
  const add = (src: Region, dst: Region): void => {
    if (src.tensor === dst.tensor && src.offsets.every((o, d) => o === dst.offsets[d])) return;
    const key = `${src.tensor}:${src.offsets.join(",")}>${dst.tensor}:${dst.offsets.join(",")}:${src.sizes.join(",")}`;
    if (seen.has(key)) return;
    seen.add(key);
    out.push({
      src: tensorId.get(src.tensor) ?? 0,
      dst: tensorId.get(dst.tensor) ?? 0,
      srcOff: src.offsets,
      dstOff: dst.offsets,
      sizes: src.sizes,
    });
  };
  for (let o = 0; o < index.ops.length; o++) {
    if (translates[o] !== 1) continue;
    const op = index.ops[o]!;
    if (op.kind !== "collective") add(op.src, op.dst);
  }
  for (const members of index.instances.values()) {
    const ops = members.map((m) => index.ops[m] as CollectiveOp);
    const first = ops[0] as CollectiveOp;
    const n = ops.length;
    const ax = first.axis;
    ops.forEach((oi, i) => {
      ops.forEach((oj, j) => {
        if (first.collective === "all-gather") add(oj.src, slab(oi.dst, n, j, ax));
        else if (first.collective === "reduce-scatter") add(slab(oj.src, n, i, ax), oi.dst);
        else if (first.collective === "all-reduce") add(oj.src, oi.dst);
        else add(slab(oj.src, n, i, ax), slab(oi.dst, n, j, ax));
      });
    });
  }
  return out;
}

/**
 * Builds the grids. Cut points start at every boundary of every region (locals, op
 * src/dst, collective slabs, claim targets and sources), then are pushed across
 * translations in both directions until no translation adds a cut (usually one pass:
 * template plans move chunks between equally cut places).
 */
export function planAtoms(index: PlanIndex, decls: ReadonlyMap<string, TensorDecl>, claim: ClaimTargets | undefined): PlanAtoms {
  const list = [...decls.values()];
  const tensorId = new Map(list.map((t, i) => [t.name, i] as const));
  const points: AxisPoints[][] = list.map((t) => t.shape.map((extent) => new AxisPoints(extent)));
  const addRegion = (r: Region): void => {
    const axes = points[tensorId.get(r.tensor) ?? -1];
    if (axes === undefined) return;
    const { offsets, sizes } = r;
    for (let d = 0; d < offsets.length; d++) {
      const axis = axes[d];
      if (axis === undefined) continue;
      const o = offsets[d]!;
      axis.add(o);
      axis.add(o + (sizes[d] ?? 0));
    }
  };
  for (const rp of index.plan.ranks) rp.local.forEach(addRegion);
  // Each op's regions are read once, here, and interned: equal boxes of one tensor (chunk j
  // of a shard, read by every rank of a node) get one integer id, whose boundaries become
  // cut points once and whose atom box is found once the cuts are final.
  const nOps = index.ops.length;
  const dims = list.reduce((m, t) => Math.max(m, t.shape.length), 1);
  const boxes = new RegionTable(dims, 2 * nOps);
  const moved = new Uint8Array(nOps);
  const translates = new Uint8Array(nOps);
  let lastName = "";
  let lastId = -1;
  const record = (r: Region, side: number): void => {
    let t = lastId;
    if (r.tensor !== lastName || t < 0) {
      t = lastId = tensorId.get(r.tensor) ?? -1;
      lastName = r.tensor;
    }
    const before = boxes.size;
    const id = boxes.intern(t, r.offsets, r.sizes);
    boxes.side[side] = id;
    if (boxes.size === before) return;
    const axes = points[t];
    if (axes === undefined) return;
    const { offsets, sizes } = r;
    for (let d = 0; d < offsets.length && d < dims; d++) {
      const axis = axes[d];
      if (axis === undefined) continue;
      const o = offsets[d]!;
      axis.add(o);
      axis.add(o + (sizes[d] ?? 0));
    }
  };
  for (let o = 0; o < nOps; o++) {
    const op = index.ops[o]!;
    record(op.src, 2 * o);
    if (op.dst === op.src) {
      // One region object as src and dst (templates share one frozen region per chunk):
      // one box, nothing moves (moved and translates stay 0).
      boxes.side[2 * o + 1] = boxes.side[2 * o]!;
    } else {
      // A copy into the same box of the same tensor (a pull or push to the same place) has one box.
      if (sameBox(op.src, op.dst)) boxes.side[2 * o + 1] = boxes.side[2 * o]!;
      else record(op.dst, 2 * o + 1);
      let shifted = false;
      for (let d = 0; d < op.dst.offsets.length; d++) if (op.dst.offsets[d] !== op.src.offsets[d]) shifted = true;
      moved[o] = shifted ? 1 : 0;
      translates[o] = shifted || op.src.tensor !== op.dst.tensor ? 1 : 0;
    }
    if (op.kind === "collective") {
      // Slab boundaries along the collective's axis, where it splits src or dst.
      const n = op.ranks.length;
      const cutSlabs = (r: Region): void => {
        const axis = points[tensorId.get(r.tensor) ?? -1]?.[op.axis];
        const step = Math.floor((r.sizes[op.axis] ?? 0) / n);
        for (let j = 1; j < n; j++) axis?.add((r.offsets[op.axis] ?? 0) + j * step);
      };
      if (op.collective !== "all-gather") cutSlabs(op.src);
      if (op.collective === "all-gather" || op.collective === "all-to-all") cutSlabs(op.dst);
    }
  }
  if (claim !== undefined) {
    // Targets of one id share their region and sources: each id is read once.
    const seen: boolean[] = [];
    claim((_, region, sources, _reduce, target) => {
      if (seen[target] === true) return;
      seen[target] = true;
      addRegion(region);
      for (const s of sources) addRegion(s.region);
    });
  }
  const cuts: number[][][] = points.map((axes) => axes.map((axis) => axis.sorted()));
  const moves = translations(index, tensorId, translates);
  for (let round = 1; moves.length > 0; round++) {
    const pending: number[][][] = cuts.map((axes) => axes.map(() => []));
    let added = 0;
    const carry = (from: number, fromOff: number, to: number, toOff: number, size: number, d: number): void => {
      const source = cuts[from]?.[d] ?? [];
      const target = cuts[to]?.[d] ?? [];
      const shift = toOff - fromOff;
      for (let k = lowerBound(source, fromOff + 1); k < source.length && (source[k] ?? 0) < fromOff + size; k++) {
        const q = (source[k] ?? 0) + shift;
        const at = lowerBound(target, q);
        if (target[at] !== q) {
          pending[to]?.[d]?.push(q);
          added++;
        }
      }
    };
    for (const m of moves) {
      m.sizes.forEach((size, d) => {
        carry(m.src, m.srcOff[d] ?? 0, m.dst, m.dstOff[d] ?? 0, size, d);
        carry(m.dst, m.dstOff[d] ?? 0, m.src, m.srcOff[d] ?? 0, size, d);
      });
    }
    if (added === 0) break;
    // A copy that overlaps itself with a shift (x[0:n] -> x[1:n+1]) adds one cut per round;
    // past a few rounds, cut the still-growing axes at every element, which is a fixpoint.
    const exhaustive = round >= MAX_CUT_ROUNDS;
    cuts.forEach((axes, t) =>
      axes.forEach((c, d) => {
        const more = pending[t]?.[d] ?? [];
        if (more.length === 0) return;
        axes[d] = exhaustive ? Array.from({ length: (list[t]?.shape[d] ?? 0) + 1 }, (_, i) => i) : normaliseCuts([...c, ...more]);
      }),
    );
  }
  const cutIndex = cuts.map((axes, t) => axes.map((c, d) => cutIndexTable(c, list[t]?.shape[d] ?? 0)));
  const grids = cuts.map((axes) => atomGrid(axes));
  boxes.locate(grids, cuts, cutIndex, list);
  return { tensorId, decls: list, grids, cutIndex, boxes, moved };
}

/**
 * The flat atom ids of one region at a time, in row-major order, written into a buffer
 * reused across calls: the hot loops of validation visit every op and must not allocate.
 */
export class AtomList {
  /** Flat atom ids; the first `count` are valid. */
  indices = new Int32Array(64);
  count = 0;
  /** Tensor id of the last loaded region. */
  tensor = 0;
  private readonly lo: number[] = [];
  private readonly hi: number[] = [];
  private readonly at: number[] = [];

  constructor(private readonly atoms: PlanAtoms) {}

  /** The tensor name and id of the last lookup (plans name one or two tensors, op after op). */
  private lastName = "";
  private lastId = -1;

  /** Loads the atoms of `region` (its boundaries are cuts by construction). */
  load(region: Region): this {
    let tensor = this.lastId;
    if (region.tensor !== this.lastName || tensor < 0) {
      tensor = this.atoms.tensorId.get(region.tensor) ?? 0;
      this.lastName = region.tensor;
      this.lastId = tensor;
    }
    const grid = this.atoms.grids[tensor] as AtomGrid;
    const tables = this.atoms.cutIndex[tensor] as readonly (Int32Array | undefined)[];
    const dims = grid.counts.length;
    const { lo, hi, at } = this;
    let total = 1;
    for (let d = 0; d < dims; d++) {
      const o = region.offsets[d] as number;
      const e = o + (region.sizes[d] as number);
      const table = tables[d];
      let a: number;
      let b: number;
      if (table !== undefined) {
        a = table[o] ?? -1;
        b = table[e] ?? -1;
      } else {
        const cuts = grid.cuts[d] as readonly number[];
        a = lowerBound(cuts, o);
        b = lowerBound(cuts, e);
        if (cuts[a] !== o) a = -1;
        if (cuts[b] !== e) b = -1;
      }
      if (a < 0 || b < 0) throw new Error(`internal: region ${region.tensor} is not aligned to its atom grid`);
      lo[d] = a;
      hi[d] = b;
      at[d] = a;
      total *= b - a;
    }
    return this.fill(grid, tensor, dims, total);
  }

  /** Writes the flat ids of the box `[lo, hi)` (cursor `at` = `lo`) of `total` atoms. */
  private fill(grid: AtomGrid, tensor: number, dims: number, total: number): this {
    const { lo, hi, at } = this;
    if (this.indices.length < total) this.indices = new Int32Array(Math.max(total, this.indices.length * 2));
    const out = this.indices;
    const last = dims - 1;
    const stride = grid.strides;
    this.count = total;
    this.tensor = tensor;
    if (total > 0 && this.contiguous(grid, dims)) {
      // Row-major contiguous box (every axis after the first cut one is whole): one range.
      let base = 0;
      for (let d = 0; d < dims; d++) base += (lo[d] as number) * (stride[d] as number);
      for (let k = 0; k < total; k++) out[k] = base + k;
      return this;
    }
    let k = 0;
    while (k < total) {
      let base = 0;
      for (let d = 0; d < last; d++) base += (at[d] as number) * (stride[d] as number);
      for (let i = lo[last] as number; i < (hi[last] as number); i++) out[k++] = base + i;
      let d = last - 1;
      while (d >= 0) {
        const next = (at[d] as number) + 1;
        if (next < (hi[d] as number)) {
          at[d] = next;
          break;
        }
        at[d] = lo[d] as number;
        d--;
      }
      if (d < 0) break;
    }
    return this;
  }

  /** Loads the atoms of op `op`'s `src` (`side` 0) or `dst` (`side` 1), from {@link OpBoxes}. */
  loadOp(op: number, side: 0 | 1): this {
    const boxes = this.atoms.boxes;
    const id = boxes.side[2 * op + side]!;
    const tensor = boxes.tensor[id]!;
    const start = boxes.first[id]!;
    if (start >= 0) {
      // One range of ids (the usual case): no per-axis walk.
      const total = boxes.count[id]!;
      if (this.indices.length < total) this.indices = new Int32Array(Math.max(total, this.indices.length * 2));
      const out = this.indices;
      for (let i = 0; i < total; i++) out[i] = start + i;
      this.count = total;
      this.tensor = tensor;
      return this;
    }
    const at = id * boxes.dims;
    const grid = this.atoms.grids[tensor] as AtomGrid;
    const dims = grid.counts.length;
    const { lo, hi, at: cursor } = this;
    let total = 1;
    for (let d = 0; d < dims; d++) {
      const a = boxes.lo[at + d]!;
      const b = boxes.hi[at + d]!;
      lo[d] = a;
      hi[d] = b;
      cursor[d] = a;
      total *= b - a;
    }
    return this.fill(grid, tensor, dims, total);
  }

  /** True when the loaded box `[lo, hi)` is one range of flat ids. */
  private contiguous(grid: AtomGrid, dims: number): boolean {
    let d = 0;
    while (d < dims - 1 && (this.hi[d] as number) - (this.lo[d] as number) === 1) d++;
    for (let e = d + 1; e < dims; e++) if (this.lo[e] !== 0 || this.hi[e] !== grid.counts[e]) return false;
    return true;
  }
}
