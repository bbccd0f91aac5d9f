// GEMM+ReduceScatter data movement from a direct ReduceScatter plan: every op that brings
// rank q's partial of rank r's slab to rank r becomes, per m-block, a delivery of those
// rows into r's `partials[q]`, issued on rank q after the tile-done slots covering them.
import type { ChunkPlan, Region, TileSchedule } from "@ovl/chunk-plan";
import { EmitError } from "../writer/index.js";

/** One m-block of partial rows moving from `from` (its producer) to `to` (the slab owner). */
export interface Delivery {
  readonly from: number;
  readonly to: number;
  /** Plan stream of the op this delivery realises. */
  readonly stream: number;
  /** Global m-block (rows `mBlock·BM ..`) of the partial tensor. */
  readonly mBlock: number;
  /** Tile-done slots of rank `from` (schedule numbering) to wait on, with their arrivals. */
  readonly waits: { slot: number; arrivals: number }[];
}

function overlaps(a: Region, b: Region): boolean {
  return a.offsets.every((o, d) => o < (b.offsets[d] ?? 0) + (b.sizes[d] ?? 0) && (b.offsets[d] ?? 0) < o + (a.sizes[d] ?? 0));
}

/**
 * The deliveries of a ReduceScatter plan over the rows of the partial tensor `src`:
 * `local-copy` on r (q = r), `pull` from q on r, or `push` from r to q whose source is
 * `src` rows inside the destination's slab. Each must depend on compute of its rows on
 * the issuing rank q and on nothing else; rows must cover whole m-blocks and whole columns.
 * Sorted per issuing rank by when its first waited slot comes in the schedule.
 * @throws {EmitError} `unsupported-op` (collectives, ops on other tensors, partial
 *   columns), `unsupported-dependency` (op dependencies: chained partial sums as in the
 *   ring need `ring-reduce`), `bad-plan` (rows not BM-aligned or not in the owner's slab).
 */
export function rsDeliveries(plan: ChunkPlan, schedule: TileSchedule, src: string, rowsPerRank: number): Delivery[] {
  const { BM } = schedule.tiling.tile;
  const { N } = schedule.tiling.problem;
  const out: Delivery[] = [];
  for (const rp of plan.ranks) {
    rp.streams.forEach((ops, s) => {
      ops.forEach((op, i) => {
        const where = `rank ${rp.rank} stream ${s} op ${i}${op.label === undefined ? "" : ` (${op.label})`}`;
        if (op.kind === "collective") throw new EmitError("unsupported-op", `${where} is a collective; use reduceScatterDirect`);
        const [from, to] = op.kind === "local-copy" ? [rp.rank, rp.rank] : op.side === "push" ? [rp.rank, op.peer] : [op.peer, rp.rank];
        if (op.deps.some((d) => d.kind === "op")) {
          throw new EmitError("unsupported-dependency", `${where} depends on another op (a chained partial sum, as in the ring); deliveries carry single partials: use reduceScatterDirect, or the ring-reduce kernel`);
        }
        if (op.src.tensor !== src) throw new EmitError("unsupported-op", `${where} reads ${op.src.tensor}; GEMM+RS moves only rows of the partial tensor ${src}`);
        const [r0 = 0, c0 = 0] = op.src.offsets;
        const [rows = 0, cols = 0] = op.src.sizes;
        if (c0 !== 0 || cols !== N) throw new EmitError("unsupported-op", `${where} moves columns ${c0}..${c0 + cols} of ${N}; GEMM+RS moves whole rows (split along rows)`);
        if (r0 % BM !== 0 || rows % BM !== 0) throw new EmitError("bad-plan", `${where} moves rows ${r0}..${r0 + rows}, not whole m-blocks of ${BM} rows`);
        if (r0 < to * rowsPerRank || r0 + rows > (to + 1) * rowsPerRank) {
          throw new EmitError("bad-plan", `${where} moves rows ${r0}..${r0 + rows} to rank ${to}, whose slab is rows ${to * rowsPerRank}..${(to + 1) * rowsPerRank}; deliveries go straight to the slab owner (a ring forwards partial sums through other ranks): use reduceScatterDirect`);
        }
        const waits: { slot: number; arrivals: number }[] = [];
        for (const dep of op.deps) {
          if (dep.kind !== "compute" || dep.rank !== from) {
            throw new EmitError(
              "unsupported-dependency",
              `${where} depends on ${dep.kind === "compute" ? `compute on rank ${dep.rank}` : "another op"}; GEMM+RS deliveries wait only on compute of the issuing rank ${from} (use reduceScatterDirect with afterCompute)`,
            );
          }
          const sched = schedule.ranks.find((r) => r.rank === from);
          for (const slot of sched?.slots ?? []) {
            if (slot.purpose === "tile-done" && slot.region !== undefined && overlaps(slot.region, dep.region) && !waits.some((w) => w.slot === slot.slot)) {
              waits.push({ slot: slot.slot, arrivals: slot.arrivals });
            }
          }
        }
        if (waits.length === 0) {
          throw new EmitError("bad-plan", `${where} does not wait on the compute of its rows; build the plan with afterCompute: true`);
        }
        for (let m = r0 / BM; m < (r0 + rows) / BM; m++) out.push({ from, to, stream: s, mBlock: m, waits });
      });
    });
  }
  const seen = new Set<string>();
  for (const d of out) {
    const key = `${d.from}:${d.to}:${d.mBlock}`;
    if (seen.has(key)) throw new EmitError("bad-plan", `rows of m-block ${d.mBlock} move from rank ${d.from} to rank ${d.to} twice`);
    seen.add(key);
  }
  const world = schedule.ranks.length;
  for (let to = 0; to < world; to++) {
    for (let from = 0; from < world; from++) {
      for (let m = (to * rowsPerRank) / BM; m < ((to + 1) * rowsPerRank) / BM; m++) {
        if (!seen.has(`${from}:${to}:${m}`)) {
          throw new EmitError("bad-plan", `rank ${to} never receives rank ${from}'s partial of m-block ${m}; the plan is not a complete ReduceScatter of ${src}`);
        }
      }
    }
  }
  // Each rank issues its deliveries in the order its tiles finish (the schedule's slotOrder).
  const rank = (d: Delivery) => {
    const order = schedule.ranks.find((r) => r.rank === d.from)?.slotOrder ?? [];
    return Math.min(...d.waits.map((w) => {
      const i = order.indexOf(w.slot);
      return i < 0 ? order.length : i;
    }));
  };
  return out.sort((a, b) => a.from - b.from || rank(a) - rank(b) || a.mBlock - b.mBlock || a.to - b.to);
}
