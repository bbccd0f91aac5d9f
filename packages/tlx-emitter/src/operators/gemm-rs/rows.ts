// GEMM+ReduceScatter for any row count: one compiled operator per (world, N, K, dtype, configuration)
// serves every M of a range as a run-time argument. With m = M / world rows per rank and cs = ⌈m / split⌉,
// chunk c of rank d's slab holds rows d·m + c·cs … d·m + min((c+1)·cs, m). Each rank's producer computes the
// m-blocks from slab r+1's first on (its own slab last) and every tile notifies the tile-done slot
// W·split + d·split + c of each peer chunk its m-block meets; an SM push per (peer d, chunk c) waits for that
// slot's tiles, copies the chunk's partial rows into d's `partials` at rows r·m + c·cs and signals slot
// r·split + c there; the reduction sums each m-block of the rank's slab over every peer's delivered rows once
// the chunks it meets have arrived. All of it is @ovl/mapping expressions of M (the variable `ovl_rows`),
// checked at every M the operator serves (`checkGemmRsRows`) before it is written.
import { add, ceilDiv, floorDiv, max, min, mod, mul, sub, toFunction, variable, type Expr, type VarExpr } from "@ovl/mapping";
import { DOMAIN_VARIABLE, RANK_VARIABLE } from "../../local/program.js";
import type { RowsRequest } from "../../core/operator.js";
import { EmitError } from "../../core/writer/index.js";
import { eq, minRowsPerRank, ROWS_VARIABLE, rowsVariables } from "../ag-gemm/rows.js";

/** The reduction's variables: its m-block within the rank's slab, and the peer whose partial it adds. */
export const REDUCE_VARIABLES = { block: "ovl_m", peer: "ovl_peer" } as const;

/** The row counts a GEMM+ReduceScatter serves, and how its slabs are chunked. */
export interface RsRowsShape {
  readonly world: number;
  /** Chunks per rank's slab. */
  readonly split: number;
  /** The GEMM's m-block (`BLOCK_M`); also the reduction's. */
  readonly blockM: number;
  /** The GEMM's n-tiles per m-block (⌈N / BLOCK_N⌉). */
  readonly numPidN: number;
  /** N: elements per row of the partial product. */
  readonly N: number;
  /** Smallest and largest M served (both multiples of the world). */
  readonly min: number;
  readonly max: number;
}

/** One SM push's segment, as expressions of M (the `push_segments` fields of `sm-push`, in order). */
export type RsSegment = readonly [src: Expr, dstRank: Expr, dst: Expr, length: Expr, waitAt: Expr, waitArrivals: Expr, notifyAt: Expr];

/** The symbolic pieces of a GEMM+ReduceScatter over M rows (see the module comment). */
export interface RsRowsMaps {
  readonly M: VarExpr;
  /** Rows per rank: M / world. */
  readonly rowsPerRank: Expr;
  /** m-blocks of the product: ⌈M / BLOCK_M⌉. */
  readonly numPidM: Expr;
  /** The producer's m-block at visit `ovl_m` (slab r+1's first m-block first). */
  readonly orderM: Expr;
  /** The producer's tile at linear tile `ovl_t` = visit m-block · numPidN + n. */
  readonly order: Expr;
  /** The (at most two) tile-done slots tile `ovl_t` notifies after its stores; -1 for none (its own slab's rows, a repeat). */
  readonly notify: readonly [Expr, Expr];
  /** The reduction's m-blocks per slab: ⌈m / BLOCK_M⌉. */
  readonly reduceBlocks: Expr;
  /** The (at most two) arrival slots block `ovl_m` of the slab waits on for peer `ovl_peer`'s rows; -1 for none. */
  readonly reduceSlots: readonly [Expr, Expr];
  /** First global row and rows of chunk `c` of rank `d`'s slab. */
  readonly chunk: (d: number, c: number) => { start: Expr; rows: Expr };
}

/** Arrival slots come first (`p·split + c`: peer p's rows of chunk c arrived), then the tile-done slots. */
export function tileDoneBase(s: Pick<RsRowsShape, "world" | "split">): number {
  return s.world * s.split;
}

/** Signal slots of the operator: arrivals, then tile-done. */
export function rsRowsSlots(s: Pick<RsRowsShape, "world" | "split">): number {
  return 2 * s.world * s.split;
}

/** The expressions of {@link RsRowsMaps} for `s`. @throws {EmitError} `bad-param` for a range the maps cannot serve. */
export function rsRowsMaps(s: RsRowsShape): RsRowsMaps {
  const { world: W, split: S, blockM: BM, numPidN: P } = s;
  const { M, rank } = rowsVariables(s, true);
  const maxBlocks = Math.ceil(s.max / BM);
  const visit = variable(DOMAIN_VARIABLE.consumer, { min: 0, max: maxBlocks - 1 });
  const tile = variable(DOMAIN_VARIABLE.producer, { min: 0, max: maxBlocks * P - 1 });
  const m = floorDiv(M, W);
  const cs = ceilDiv(m, S);
  const numPidM = ceilDiv(M, BM);
  // The producer starts at slab r+1's first m-block, so its own slab's rows come last.
  const start = floorDiv(mul(mod(add(rank, 1), W), m), BM);
  const orderOf = (v: Expr) => mod(add(v, start), numPidM);
  const orderM = orderOf(visit);
  const order = add(mul(orderOf(floorDiv(tile, P)), P), mod(tile, P));
  // Tile-done slot of the chunk holding global row `row`; -1 (clamped) where the row is the producer's own.
  const base = tileDoneBase(s);
  const never = 2 * W * S + 1;
  const owner = (row: Expr) => floorDiv(row, m);
  const chunkOf = (row: Expr) => add(mul(owner(row), S), floorDiv(mod(row, m), cs));
  const first = mul(floorDiv(tile, P), BM);
  const last = sub(min(add(first, BM), M), 1);
  const g0 = chunkOf(first);
  const g1 = chunkOf(last);
  const notify: [Expr, Expr] = [
    max(-1, sub(add(base, g0), mul(never, eq(owner(first), rank)))),
    max(-1, sub(add(base, g1), mul(never, add(eq(g1, g0), eq(owner(last), rank))))),
  ];
  // The reduction: block `ovl_m` of the slab, rows mb·BM … min((mb+1)·BM, m), from peer `ovl_peer`.
  const block = variable(REDUCE_VARIABLES.block, { min: 0, max: Math.ceil(s.max / W / BM) - 1 });
  const peer = variable(REDUCE_VARIABLES.peer, { min: 0, max: W - 1 });
  const rowLo = mul(block, BM);
  const rowHi = sub(min(add(rowLo, BM), m), 1);
  const r0 = add(mul(peer, S), floorDiv(rowLo, cs));
  const r1 = add(mul(peer, S), floorDiv(rowHi, cs));
  const reduceSlots: [Expr, Expr] = [r0, max(-1, sub(r1, mul(never, eq(r1, r0))))];
  const chunk = (d: number, c: number) => ({
    start: add(mul(d, m), mul(c, cs)),
    rows: sub(min(mul(c + 1, cs), m), mul(c, cs)),
  });
  return { M, rowsPerRank: m, numPidM, orderM, order, notify, reduceBlocks: ceilDiv(m, BM), reduceSlots, chunk };
}

/**
 * The SM pushes of every rank over M: rank r sends chunk c of peer d's slab (d = r+1, r+2, … as the producer
 * computes them) once the m-blocks meeting it are done (`numPidN` tiles each), into d's `partials` at rows
 * r·m + c·cs, and signals slot r·split + c there.
 */
export function rsRowsSegments(s: RsRowsShape, maps: RsRowsMaps): RsSegment[][] {
  const { world: W, split: S, blockM: BM, numPidN: P, N } = s;
  const m = maps.rowsPerRank;
  return Array.from({ length: W }, (_, r) =>
    Array.from({ length: (W - 1) * S }, (_, i): RsSegment => {
      const d = (r + 1 + Math.floor(i / S)) % W;
      const c = i % S;
      const { start, rows } = maps.chunk(d, c);
      const blocks = add(sub(floorDiv(sub(add(start, rows), 1), BM), floorDiv(start, BM)), 1);
      const local = sub(start, mul(d, m));
      return [
        mul(start, N),
        add(0, d),
        mul(add(mul(r, m), local), N),
        mul(rows, N),
        add(0, tileDoneBase(s) + d * S + c),
        mul(blocks, P),
        add(0, r * S + c),
      ];
    }),
  );
}

/**
 * Checks, at every M of the range, that each rank's producer computes every tile once (its m-block order a
 * permutation) and notifies exactly the tile-done slots of the peer chunks its m-block meets; that the pushes
 * deliver every row of every peer's partial to that peer exactly once, each push inside one chunk, waiting for
 * all the tiles of that chunk, 16-byte aligned (`unit` elements) and signalled in its arrival slot, every slot
 * written once per launch; and that the reduction covers the slab's rows once with each block waiting exactly on
 * the arrival slots of the chunks its rows meet. Returns how many row counts were checked.
 * @throws {EmitError} `bad-schedule` naming the first M, rank and block or push that breaks it.
 */
export function checkGemmRsRows(s: RsRowsShape, maps: RsRowsMaps, segments: readonly (readonly RsSegment[])[], unit = 1): number {
  const { world: W, split: S, blockM: BM, numPidN: P, N } = s;
  const v = [ROWS_VARIABLE, RANK_VARIABLE, DOMAIN_VARIABLE.consumer, DOMAIN_VARIABLE.producer, REDUCE_VARIABLES.peer];
  const f = (e: Expr) => toFunction(e, v);
  const orderM = f(maps.orderM);
  const order = f(maps.order);
  const notify = maps.notify.map(f);
  const reduceSlots = maps.reduceSlots.map(f);
  const [m_, blocks_, reduceBlocks_] = [f(maps.rowsPerRank), f(maps.numPidM), f(maps.reduceBlocks)];
  const segs = segments.map((r) => r.map((seg) => seg.map(f)));
  const base = tileDoneBase(s);
  const fail = (M: number, what: string): never => {
    throw new EmitError("bad-schedule", `GEMM+ReduceScatter over ${M} rows: ${what}`);
  };
  if (segments.length !== W) fail(s.min, `pushes for ${segments.length} ranks, not ${W}`);
  let checked = 0;
  for (let M = s.min; M <= s.max; M += W) {
    checked += 1;
    const m = M / W;
    const cs = Math.ceil(m / S);
    const chunkOf = (row: number) => Math.floor(row / m) * S + Math.floor((row % m) / cs);
    if (m_(M, 0, 0, 0, 0) !== m) fail(M, `${m_(M, 0, 0, 0, 0)} rows per rank`);
    const nb = blocks_(M, 0, 0, 0, 0);
    if (nb !== Math.ceil(M / BM)) fail(M, `${nb} m-blocks`);
    const rb = reduceBlocks_(M, 0, 0, 0, 0);
    if (rb !== Math.ceil(m / BM)) fail(M, `the reduction covers ${rb} m-blocks of a ${m}-row slab`);
    // Tile-done arrivals per producing rank and slot, from what the producer's tiles notify.
    const arrivals = Array.from({ length: W }, () => new Map<number, number>());
    for (let r = 0; r < W; r++) {
      const seen = new Uint8Array(nb);
      for (let i = 0; i < nb; i++) {
        const b = orderM(M, r, i, 0, 0);
        if (!(b >= 0 && b < nb) || seen[b]) fail(M, `rank ${r} computes m-block ${b} at step ${i}`);
        seen[b] = 1;
        for (const n of new Set([0, P - 1])) {
          const t = order(M, r, 0, i * P + n, 0);
          if (t !== b * P + n) fail(M, `rank ${r} computes tile ${t} at linear tile ${i * P + n}, not tile ${b * P + n}`);
        }
      }
      for (let b = 0; b < nb; b++) {
        const want = new Set<number>();
        for (let g = chunkOf(b * BM); g <= chunkOf(Math.min((b + 1) * BM, M) - 1); g++) if (Math.floor(g / S) !== r) want.add(base + g);
        for (const n of new Set([0, P - 1])) {
          const got = new Set(notify.map((fn) => fn(M, r, 0, b * P + n, 0)).filter((x) => x >= 0));
          if (got.size !== want.size || [...want].some((x) => !got.has(x))) {
            fail(M, `rank ${r} tile ${b * P + n} notifies [${[...got].join(", ")}], its rows are in [${[...want].join(", ")}]`);
          }
        }
        for (const x of want) arrivals[r]!.set(x, (arrivals[r]!.get(x) ?? 0) + P);
      }
    }
    // Pushes: per destination rank, the arrival slots written and the rows received from each peer.
    const written = Array.from({ length: W }, () => new Uint8Array(W * S));
    const received = Array.from({ length: W }, () => Array.from({ length: W }, (): [number, number][] => []));
    for (let r = 0; r < W; r++) {
      for (const seg of segs[r]!) {
        const [src, d, dst, len, waitAt, waitArrivals, notifyAt] = seg.map((fn) => fn(M, r, 0, 0, 0)) as number[] as [
          number,
          number,
          number,
          number,
          number,
          number,
          number,
        ];
        if (len <= 0 || src % N || len % N) fail(M, `a push of rank ${r} is not whole rows (offset ${src}, length ${len})`);
        if (src % unit || dst % unit) fail(M, `a push of rank ${r} starts off 16-byte alignment (${src} -> ${dst})`);
        const [lo, hi] = [src / N, (src + len) / N];
        if (!(d >= 0 && d < W) || d === r || Math.floor(lo / m) !== d || Math.floor((hi - 1) / m) !== d)
          fail(M, `rank ${r} pushes rows ${lo}..${hi} to rank ${d}, which does not own them`);
        const g = chunkOf(lo);
        if (chunkOf(hi - 1) !== g) fail(M, `rank ${r}'s push of rows ${lo}..${hi} spans two chunks`);
        if (dst !== (r * m + lo - d * m) * N) fail(M, `rank ${r}'s push of rows ${lo}..${hi} lands at ${dst}, not its rows of partials`);
        if (waitAt !== base + g || waitArrivals !== (arrivals[r]!.get(waitAt) ?? 0) || waitArrivals <= 0) {
          fail(M, `rank ${r}'s push of rows ${lo}..${hi} waits on slot ${waitAt} for ${waitArrivals} tiles`);
        }
        if (notifyAt !== r * S + (g % S)) fail(M, `rank ${r}'s push of rows ${lo}..${hi} to rank ${d} signals slot ${notifyAt}`);
        if (written[d]![notifyAt]) fail(M, `slot ${notifyAt} of rank ${d} is written twice`);
        written[d]![notifyAt] = 1;
        received[d]![r]!.push([lo - d * m, hi - d * m]);
      }
    }
    for (let d = 0; d < W; d++) {
      for (let p = 0; p < W; p++) {
        if (p === d) continue;
        let next = 0;
        for (const [lo, hi] of received[d]![p]!.sort((a, b) => a[0] - b[0])) {
          if (lo !== next)
            fail(
              M,
              `rank ${d} ${lo < next ? `receives row ${lo} of rank ${p}'s partial twice` : `never receives rows ${next}..${lo} of rank ${p}'s partial`}`,
            );
          next = hi;
        }
        if (next !== m) fail(M, `rank ${d} never receives rows ${next}..${m} of rank ${p}'s partial`);
        for (let mb = 0; mb < rb; mb++) {
          const want = new Set<number>();
          for (let c = Math.floor((mb * BM) / cs); c <= Math.floor((Math.min((mb + 1) * BM, m) - 1) / cs); c++) want.add(p * S + c);
          const got = new Set(reduceSlots.map((fn) => fn(M, d, mb, 0, p)).filter((x) => x >= 0));
          if (got.size !== want.size || [...want].some((x) => !got.has(x))) {
            fail(M, `rank ${d} reduces block ${mb} of rank ${p} after [${[...got].join(", ")}], its rows need [${[...want].join(", ")}]`);
          }
          for (const x of got) if (!written[d]![x]) fail(M, `rank ${d} block ${mb} waits on slot ${x}, which nothing writes`);
        }
      }
    }
  }
  return checked;
}

/** `Operator.rows` resolved against the world and the tile: the shape the maps are built for. */
export function rsRowsShape(req: RowsRequest, world: number, blockM: number, blockN: number, N: number): RsRowsShape {
  const split = req.split ?? 2;
  if (!Number.isSafeInteger(split) || split < 1) throw new EmitError("bad-param", `rows.split must be a positive integer, got ${split}`);
  const least = world * minRowsPerRank(split, blockM);
  const lo = req.min ?? least;
  const hi = req.max ?? Math.max(lo, 32768 - (32768 % world));
  return { world, split, blockM, numPidN: Math.ceil(N / blockN), N, min: lo, max: hi };
}
