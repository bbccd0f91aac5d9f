// GEMM+ReduceScatter data movement from a direct ReduceScatter plan: every op that brings
// rank q's partial of rank r's slab to rank r becomes one delivery (a chunk: contiguous
// rows) into r's `partials[q]`, issued on rank q after the tile-done slots covering them.
import type { ChunkPlan, Region, TileSchedule } from "@ovl/chunk-plan";
import { EmitError } from "../core/writer/index.js";

/**
 * One chunk of partial rows (a plan op's row range: whole m-blocks, contiguous in the
 * row-major partial tensor) moving from `from` (its producer) to `to` (the slab owner).
 */
export interface Delivery {
  readonly from: number;
  readonly to: number;
  /** Plan stream of the op this delivery realises. */
  readonly stream: number;
  /** First global m-block (rows `mBlock·BM ..`) of the chunk in the partial tensor. */
  readonly mBlock: number;
  /** m-blocks in the chunk (rows `mBlock·BM .. (mBlock + blocks)·BM`). */
  readonly blocks: number;
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
 * Sorted per issuing rank by {@link sendOrder} (peers' slabs first, the local slab last),
 * then by rows: the order the producer computes them and its comm streams send them.
 * @throws {EmitError} `unsupported-op` (collectives, ops on other tensors, partial
 *   columns), `unsupported-dependency` (op dependencies: chained partial sums as in the
 *   ring need `ring-reduce`), `bad-plan` (rows not BM-aligned or not in the owner's slab).
 *   Each message ends with the nearest plan that works: GEMM+RS's, or `nearest` when given
 *   (an operator built on these deliveries, e.g. GEMM+AllReduce, names its own).
 */
export function rsDeliveries(plan: ChunkPlan, schedule: TileSchedule, src: string, rowsPerRank: number, nearest?: string): Delivery[] {
  const use = (own: string) => nearest ?? own;
  const { BM } = schedule.tiling.tile;
  const { N } = schedule.tiling.problem;
  const out: Delivery[] = [];
  for (const rp of plan.ranks) {
    rp.streams.forEach((ops, s) => {
      ops.forEach((op, i) => {
        const where = `rank ${rp.rank} stream ${s} op ${i}${op.label === undefined ? "" : ` (${op.label})`}`;
        if (op.kind === "collective")
          throw new EmitError(
            "unsupported-op",
            `${where} is a collective (compile() decomposes a reduce-scatter collective into deliveries); ${use("use reduceScatterDirect({ afterCompute: true })")}`,
          );
        const [from, to] = op.kind === "local-copy" ? [rp.rank, rp.rank] : op.side === "push" ? [rp.rank, op.peer] : [op.peer, rp.rank];
        if (op.deps.some((d) => d.kind === "op")) {
          throw new EmitError(
            "unsupported-dependency",
            `${where} depends on another op (a chained partial sum, as in the ring); deliveries carry single partials: ${use("use reduceScatterDirect({ afterCompute: true })")}`,
          );
        }
        if (op.src.tensor !== src)
          throw new EmitError(
            "unsupported-op",
            `${where} reads ${op.src.tensor}; GEMM+RS moves only rows of the partial tensor ${src}: ${use(`use reduceScatterDirect({ afterCompute: true }) with src: "${src}"`)}`,
          );
        const [r0 = 0, c0 = 0] = op.src.offsets;
        const [rows = 0, cols = 0] = op.src.sizes;
        if (c0 !== 0 || cols !== N)
          throw new EmitError(
            "unsupported-op",
            `${where} moves columns ${c0}..${c0 + cols} of ${N}; GEMM+RS moves whole rows: ${use("use reduceScatterDirect({ afterCompute: true }) split along rows (splitAxis 0)")}`,
          );
        if (r0 % BM !== 0 || rows % BM !== 0)
          throw new EmitError("bad-plan", `${where} moves rows ${r0}..${r0 + rows}, not whole m-blocks of ${BM} rows`);
        if (r0 < to * rowsPerRank || r0 + rows > (to + 1) * rowsPerRank) {
          throw new EmitError(
            "bad-plan",
            `${where} moves rows ${r0}..${r0 + rows} to rank ${to}, whose slab is rows ${to * rowsPerRank}..${(to + 1) * rowsPerRank}; deliveries go straight to the slab owner (a ring forwards partial sums through other ranks): ${use("use reduceScatterDirect")}`,
          );
        }
        const waits: { slot: number; arrivals: number }[] = [];
        for (const dep of op.deps) {
          if (dep.kind !== "compute" || dep.rank !== from) {
            throw new EmitError(
              "unsupported-dependency",
              `${where} depends on ${dep.kind === "compute" ? `compute on rank ${dep.rank}` : "another op"}; GEMM+RS deliveries wait only on compute of the issuing rank ${from}: ${use("use reduceScatterDirect({ afterCompute: true })")}`,
            );
          }
          const sched = schedule.ranks.find((r) => r.rank === from);
          for (const slot of sched?.slots ?? []) {
            if (
              slot.purpose === "tile-done" &&
              slot.region !== undefined &&
              overlaps(slot.region, dep.region) &&
              !waits.some((w) => w.slot === slot.slot)
            ) {
              waits.push({ slot: slot.slot, arrivals: slot.arrivals });
            }
          }
        }
        if (waits.length === 0) {
          throw new EmitError(
            "bad-plan",
            `${where} does not wait on the compute of its rows: ${use("build the plan with afterCompute: true")}`,
          );
        }
        out.push({ from, to, stream: s, mBlock: r0 / BM, blocks: rows / BM, waits });
      });
    });
  }
  const seen = new Set<string>();
  for (const d of out) {
    for (let m = d.mBlock; m < d.mBlock + d.blocks; m++) {
      const key = `${d.from}:${d.to}:${m}`;
      if (seen.has(key)) throw new EmitError("bad-plan", `rows of m-block ${m} move from rank ${d.from} to rank ${d.to} twice`);
      seen.add(key);
    }
  }
  const world = schedule.ranks.length;
  for (let to = 0; to < world; to++) {
    for (let from = 0; from < world; from++) {
      for (let m = (to * rowsPerRank) / BM; m < ((to + 1) * rowsPerRank) / BM; m++) {
        if (!seen.has(`${from}:${to}:${m}`)) {
          throw new EmitError(
            "bad-plan",
            `rank ${to} never receives rank ${from}'s partial of m-block ${m}; the plan is not a complete ReduceScatter of ${src}`,
          );
        }
      }
    }
  }
  return out.sort((a, b) => a.from - b.from || sendOrder(a, world) - sendOrder(b, world) || a.mBlock - b.mBlock || a.stream - b.stream);
}

/**
 * Where a delivery comes in its producer's sending order: peers' slabs first, rank
 * `from + 1` first and `from - 1` last (each destination at a different distance, so every
 * rank targets a different peer at any time), and the local slab after them all, since
 * its rows never cross NVLink and so gain nothing from being finished early.
 */
export function sendOrder(d: Pick<Delivery, "from" | "to">, world: number): number {
  return (((d.to - d.from - 1) % world) + world) % world;
}

/**
 * The arrival slot on rank `d.to` that delivery `d` signals once its rows have landed:
 * `from·B + (first m-block of the chunk within the slab)` (B = m-blocks per slab), so
 * slots stay in `0..W·B-1` whatever the chunking.
 */
export function arrivalSlot(d: Pick<Delivery, "from" | "to" | "mBlock">, blocksPerSlab: number): number {
  return d.from * blocksPerSlab + (d.mBlock - d.to * blocksPerSlab);
}

/**
 * The `rs-reduce` slot table of rank `to` (`W·B` entries): entry `p·B + mb` is the slot
 * signalled when rank p's partial rows of slab m-block mb have landed there. With
 * `perMBlock` (one signal per m-block, as the `sm-push` segments give) it is `p·B + mb`;
 * otherwise the {@link arrivalSlot} of the chunk holding mb. The rank's own entries (`p = to`)
 * are -1: its own partial is read in place, never delivered.
 * @throws {EmitError} `bad-plan` when some peer's (p, mb) is delivered by no chunk, or a
 *   delivery brings the rank its own partial.
 */
export function arrivalSlotTable(
  deliveries: readonly Delivery[],
  to: number,
  world: number,
  blocksPerSlab: number,
  perMBlock: boolean,
): number[] {
  const table = new Array<number>(world * blocksPerSlab).fill(-1);
  for (const d of deliveries) {
    if (d.to !== to) continue;
    if (d.from === to) throw new EmitError("bad-plan", `rank ${to}'s own partial is read in place, not delivered (m-block ${d.mBlock})`);
    for (let m = d.mBlock; m < d.mBlock + d.blocks; m++) {
      const at = arrivalSlot({ from: d.from, to, mBlock: m }, blocksPerSlab);
      table[at] = perMBlock ? at : arrivalSlot(d, blocksPerSlab);
    }
  }
  const missing = table.findIndex((slot, i) => slot < 0 && Math.floor(i / blocksPerSlab) !== to);
  if (missing >= 0) {
    throw new EmitError(
      "bad-plan",
      `rank ${to} never receives rank ${Math.floor(missing / blocksPerSlab)}'s partial of slab m-block ${missing % blocksPerSlab}`,
    );
  }
  return table;
}
