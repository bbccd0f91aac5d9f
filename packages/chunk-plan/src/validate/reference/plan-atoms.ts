// Reference copy (test oracle): the validator as it was before its per-op arrays, region
// interning and CSR rewrite, kept so a property test can check that the fast path reports
// exactly what this straightforward version reports. Not part of the package's surface.
// The atom grid of every tensor of a plan: each axis is cut at every region boundary the
// plan uses, and cuts are carried across every copy (a translation), so a copy maps whole
// atoms onto whole atoms. Values, writers and coverage are then tracked per atom.
import type { CollectiveOp, Region, TensorDecl } from "../../model/schema.js";
import { atomGrid, lowerBound, normaliseCuts, type AtomGrid } from "../../region/atoms.js";
import type { ClaimTargets } from "./claim.js";
import { slab, type PlanIndex } from "./plan-index.js";

/** Atom grids per tensor, with tensor ids. */
export interface PlanAtoms {
  readonly tensorId: ReadonlyMap<string, number>;
  readonly decls: readonly TensorDecl[];
  readonly grids: readonly AtomGrid[];
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

/** Every (src region → dst region) translation the plan performs, deduplicated. */
function translations(index: PlanIndex, tensorId: ReadonlyMap<string, number>): Translation[] {
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
  index.ops.forEach((op) => {
    if (op.kind !== "collective") add(op.src, op.dst);
  });
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
  const points: Set<number>[][] = list.map((t) => t.shape.map((extent) => new Set([0, extent])));
  const addRegion = (r: Region): void => {
    const axes = points[tensorId.get(r.tensor) ?? -1];
    if (axes === undefined) return;
    r.offsets.forEach((o, d) => {
      axes[d]?.add(o);
      axes[d]?.add(o + (r.sizes[d] ?? 0));
    });
  };
  for (const rp of index.plan.ranks) rp.local.forEach(addRegion);
  for (const op of index.ops) {
    addRegion(op.src);
    addRegion(op.dst);
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
    const seen = new Set<Region>();
    claim((_, region, sources) => {
      if (!seen.has(region)) {
        seen.add(region);
        addRegion(region);
      }
      for (const s of sources) {
        if (!seen.has(s.region)) {
          seen.add(s.region);
          addRegion(s.region);
        }
      }
    });
  }
  const cuts: number[][][] = points.map((axes) => axes.map((set) => normaliseCuts(set)));
  const moves = translations(index, tensorId);
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
  return { tensorId, decls: list, grids: cuts.map((axes) => atomGrid(axes)) };
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

  /** Loads the atoms of `region` (its boundaries are cuts by construction). */
  load(region: Region): this {
    const tensor = this.atoms.tensorId.get(region.tensor) ?? 0;
    const grid = this.atoms.grids[tensor] as AtomGrid;
    const dims = grid.counts.length;
    const { lo, hi, at } = this;
    let total = 1;
    for (let d = 0; d < dims; d++) {
      const cuts = grid.cuts[d] as readonly number[];
      const o = region.offsets[d] as number;
      const a = lowerBound(cuts, o);
      const b = lowerBound(cuts, o + (region.sizes[d] as number));
      if (cuts[a] !== o || cuts[b] !== o + (region.sizes[d] as number)) {
        throw new Error(`internal: region ${region.tensor} is not aligned to its atom grid`);
      }
      lo[d] = a;
      hi[d] = b;
      at[d] = a;
      total *= b - a;
    }
    if (this.indices.length < total) this.indices = new Int32Array(Math.max(total, this.indices.length * 2));
    const out = this.indices;
    const last = dims - 1;
    const stride = grid.strides;
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
    this.count = total;
    this.tensor = tensor;
    return this;
  }
}
