// AllGather+GEMM for any row count: one compiled operator per (world, N, K, dtype, configuration)
// serves every M of a range as a run-time argument. The 1-D swizzle push AllGather (rank r pushes
// its shard to r-1, r-2, … in `split` chunks) and the consumer's tile order and wait slots are
// @ovl/mapping expressions of M (the variable `ovl_rows`): chunk c of rank q holds rows
// q·m + c·cs … q·m + min((c+1)·cs, m) with m = M / world and cs = ⌈m / split⌉, and is signalled in
// slot q·split + c of every other rank. The plan is checked at every M the operator serves
// (`checkAgGemmRows`) before it is written.
import { add, ceilDiv, floorDiv, max, min, mod, mul, staticMap, sub, toFunction, variable, type Expr, type VarExpr } from "@ovl/mapping";
import { DOMAIN_VARIABLE, RANK_VARIABLE } from "../../local/program.js";
import type { Rows, RowsSegment } from "../../core/manifest/schema.js";
import type { RowsRequest } from "../../core/operator.js";
import { EmitError } from "../../core/writer/index.js";

/** The row count's variable in a rows manifest and the kernel's maps (an inserted kernel parameter). */
export const ROWS_VARIABLE = "ovl_rows";

/** The row counts an AllGather+GEMM serves, and how its rows are chunked. */
export interface AgRowsShape {
  readonly world: number;
  /** Chunks per rank's shard. */
  readonly split: number;
  /** The GEMM's m-block (`BLOCK_M`). */
  readonly blockM: number;
  /** K: elements per row of the gathered operand. */
  readonly K: number;
  /** Smallest and largest M served (both multiples of the world). */
  readonly min: number;
  readonly max: number;
}

/** The symbolic pieces of an AllGather+GEMM over M rows (see the module comment). */
export interface AgRowsMaps {
  readonly M: VarExpr;
  /** The consumer's visit order: m-block visited at step `ovl_m` (the rank's own blocks first, then r+1's, …). */
  readonly order: Expr;
  /** The (at most two) chunk slots m-block `ovl_m` waits on; -1 for none (a chunk of its own rank, or a repeat). */
  readonly slots: readonly [Expr, Expr];
  /** m-blocks: ⌈M / BLOCK_M⌉. */
  readonly numPidM: Expr;
  /** First row and rows of chunk `c` of rank `q`. */
  readonly chunk: (q: number, c: number) => { start: Expr; rows: Expr };
}

/** The fewest rows per rank that keep every chunk at least an m-block tall, so a block meets at most two chunks. */
export function minRowsPerRank(split: number, blockM: number): number {
  // The last chunk holds m − (split−1)·⌈m/split⌉ ≥ (m − (split−1)²) / split rows.
  return split * blockM + (split - 1) ** 2;
}

/** `1` where `a = b`, else `0` (integer expressions). */
export const eq = (a: Expr, b: Expr) => sub(1, min(1, max(sub(a, b), sub(b, a))));

/**
 * The row count and rank variables of the maps over the rows `s` serves, once the range is checked: `min..max`
 * multiples of the world, `min <= max` (with `safeIntegers`, both safe integers too), and `min` at least the world's
 * {@link minRowsPerRank}.
 * @throws {EmitError} `bad-param` for a range the maps cannot serve.
 */
export function rowsVariables(
  s: Pick<AgRowsShape, "world" | "split" | "blockM" | "min" | "max">,
  safeIntegers = false,
): { M: VarExpr; rank: VarExpr } {
  const { world: W, split: S, blockM: BM } = s;
  const least = W * minRowsPerRank(S, BM);
  const unsafe = safeIntegers && (!Number.isSafeInteger(s.min) || !Number.isSafeInteger(s.max));
  if (unsafe || s.min % W || s.max % W || s.min > s.max) {
    throw new EmitError("bad-param", `rows ${s.min}..${s.max} must be multiples of the world (${W}), min <= max`);
  }
  if (s.min < least) {
    throw new EmitError(
      "bad-param",
      `rows from ${s.min}: with ${S} chunks per rank and ${BM}-row m-blocks, each rank needs at least ${least / W} rows (M >= ${least}); below that the operator falls back to not overlapping`,
    );
  }
  return { M: variable(ROWS_VARIABLE, { min: s.min, max: s.max }), rank: variable(RANK_VARIABLE, { min: 0, max: W - 1 }) };
}

/**
 * The expressions of {@link AgRowsMaps} for `s`. With `waitOwn` (AllToAll+GEMM, whose own slab also lands by a copy)
 * an m-block waits on the chunks of its own rank too.
 * @throws {EmitError} `bad-param` for a range the maps cannot serve.
 */
export function agRowsMaps(s: AgRowsShape, waitOwn = false): AgRowsMaps {
  const { world: W, split: S, blockM: BM } = s;
  const { M, rank } = rowsVariables(s);
  const visit = variable(DOMAIN_VARIABLE.consumer, { min: 0, max: Math.ceil(s.max / BM) - 1 });
  const m = floorDiv(M, W);
  const cs = ceilDiv(m, S);
  const numPidM = ceilDiv(M, BM);
  const order = mod(add(visit, ceilDiv(mul(rank, m), BM)), numPidM);
  // Slot maps are printed over the remapped m-block; `visit` stands for it.
  const first = mul(visit, BM);
  const last = sub(min(add(first, BM), M), 1);
  const owner = (row: Expr) => floorDiv(row, m);
  const slotOf = (row: Expr) => add(mul(owner(row), S), floorDiv(mod(row, m), cs));
  const never = W * S + 1; // subtracted where a slot must not be waited on: the result clamps to -1
  const g0 = slotOf(first);
  const g1 = slotOf(last);
  const slots: [Expr, Expr] = waitOwn
    ? [g0, max(-1, sub(g1, mul(never, eq(g1, g0))))]
    : [max(-1, sub(g0, mul(never, eq(owner(first), rank)))), max(-1, sub(g1, mul(never, add(eq(g1, g0), eq(owner(last), rank)))))];
  const chunk = (q: number, c: number) => {
    const start = add(mul(q, m), mul(c, cs));
    return { start, rows: sub(min(mul(c + 1, cs), m), mul(c, cs)) };
  };
  return { M, order, slots, numPidM, chunk };
}

/** The AllGather's host ops over M: rank r pushes chunk c of its shard to r-1, r-2, … with a signal in slot r·split + c. */
export function agRowsHostOps(
  s: Pick<AgRowsShape, "world" | "split" | "K">,
  maps: Pick<AgRowsMaps, "chunk">,
  buffer: string,
): Rows["hostOps"] {
  const { world: W, split: S, K } = s;
  return Array.from({ length: W }, (_, r) => ({
    rank: r,
    streams: [
      {
        name: "comm0",
        ops: Array.from({ length: (W - 1) * S }, (_, i) => {
          const peer = (((r - 1 - Math.floor(i / S)) % W) + W) % W;
          const c = i % S;
          const { start, rows } = maps.chunk(r, c);
          const seg = (rank: number): RowsSegment => ({ buffer, rank, offset: mul(start, K), length: mul(rows, K) });
          return { kind: "copy" as const, src: seg(r), dst: seg(peer), signal: { rank: peer, slot: r * S + c } };
        }),
      },
    ],
  }));
}

/** The tile program's maps as the kernel prints them. */
export function agRowsTileMaps(maps: AgRowsMaps) {
  return { order: staticMap(maps.order), slots: maps.slots.map((e) => staticMap(e)) };
}

/**
 * Checks, at every M of the range, that the host ops deliver every row of every other rank to each rank exactly
 * once, each copy inside one chunk and signalled in that chunk's slot, every slot of a rank written once per
 * launch; and that each rank's order visits every m-block once and every m-block waits exactly on the chunks of
 * other ranks its rows meet. Returns how many row counts were checked; `what` names the operator in a failure.
 * @throws {EmitError} `bad-schedule` naming the first M, rank and block or op that breaks it.
 */
export function checkAgGemmRows(s: AgRowsShape, maps: AgRowsMaps, hostOps: Rows["hostOps"], what = "AllGather+GEMM"): number {
  const { world: W, split: S, blockM: BM } = s;
  const v = [ROWS_VARIABLE, RANK_VARIABLE, DOMAIN_VARIABLE.consumer];
  const order = toFunction(maps.order, v);
  const slots = maps.slots.map((e) => toFunction(e, v));
  const blocks = toFunction(maps.numPidM, v);
  const ops = rowsCopies(hostOps);
  const fail = (M: number, why: string): never => {
    throw new EmitError("bad-schedule", `${what} over ${M} rows: ${why}`);
  };
  let checked = 0;
  for (let M = s.min; M <= s.max; M += W) {
    checked += 1;
    const slotOfRow = chunkSlotOfRow(M, W, S);
    const written = checkAgDeliveries(fail, s, ops, M);
    const nb = blocks(M, 0, 0);
    if (nb !== Math.ceil(M / BM)) fail(M, `${nb} m-blocks`);
    for (let r = 0; r < W; r++) {
      checkConsumerVisits(
        fail,
        { M, rank: r, blockM: BM, blocks: nb, order, slots, slotOfRow, written: written[r]! },
        (g) => Math.floor(g / S) !== r,
      );
    }
  }
  return checked;
}

/**
 * Checks that the AllGather's copies `ops` deliver, at M rows, every row of every other rank to each rank exactly once
 * (none of its own), each copy inside one chunk of its sender's shard and signalled in that chunk's slot on the
 * receiving rank, every slot of a rank written once. Returns the slots written on each rank.
 */
export function checkAgDeliveries(
  fail: RowsFail,
  s: Pick<AgRowsShape, "world" | "split" | "K">,
  ops: readonly RowsCopy[],
  M: number,
): Uint8Array[] {
  const { world: W, split: S, K } = s;
  const m = M / W;
  const slotOfRow = chunkSlotOfRow(M, W, S);
  // Per destination rank, the row intervals received and the slots written.
  const received: [number, number][][] = Array.from({ length: W }, () => []);
  const written = Array.from({ length: W }, () => new Uint8Array(W * S));
  for (const op of ops) {
    const off = op.srcOff(M, 0, 0);
    const len = op.len(M, 0, 0);
    if (off !== op.dstOff(M, 0, 0) || len !== op.dstLen(M, 0, 0)) fail(M, `a copy from rank ${op.src} moves rows to another place`);
    if (len <= 0 || off % K || len % K) fail(M, `a copy from rank ${op.src} is not whole rows (offset ${off}, length ${len})`);
    const [lo, hi] = [off / K, (off + len) / K];
    if (Math.floor(lo / m) !== op.src || Math.floor((hi - 1) / m) !== op.src)
      fail(M, `rank ${op.src} sends rows ${lo}..${hi} it does not own`);
    if (op.slotRank !== op.dst || slotOfRow(lo) !== op.slot || slotOfRow(hi - 1) !== op.slot) {
      fail(M, `the copy of rows ${lo}..${hi} to rank ${op.dst} signals slot ${op.slot} of rank ${op.slotRank}`);
    }
    if (written[op.dst]![op.slot]) fail(M, `slot ${op.slot} of rank ${op.dst} is written twice`);
    written[op.dst]![op.slot] = 1;
    received[op.dst]!.push([lo, hi]);
  }
  // Every row of every other rank exactly once, none of its own: the sorted intervals tile [0, M) minus its shard.
  for (let r = 0; r < W; r++) checkRowsTiled(fail, M, r, [...received[r]!, [r * m, (r + 1) * m]], "or its own");
  return written;
}

/** A rows host op's copy as functions of (M, rank, m-block), with the rank that issues it and its signal. */
export interface RowsCopy {
  readonly issuer: number;
  readonly src: number;
  readonly dst: number;
  readonly srcOff: (...x: number[]) => number;
  readonly dstOff: (...x: number[]) => number;
  readonly len: (...x: number[]) => number;
  readonly dstLen: (...x: number[]) => number;
  /** The slot signalled and the rank it is on; -1 for none. */
  readonly slot: number;
  readonly slotRank: number;
}

/** Every copy of `hostOps`, its offsets and lengths as functions of the row count, rank and m-block variables. */
export function rowsCopies(hostOps: Rows["hostOps"]): RowsCopy[] {
  const v = [ROWS_VARIABLE, RANK_VARIABLE, DOMAIN_VARIABLE.consumer];
  return hostOps.flatMap((h) =>
    h.streams.flatMap((st) =>
      st.ops.map((op) => ({
        issuer: h.rank,
        src: op.src.rank,
        dst: op.dst.rank,
        srcOff: toFunction(op.src.offset, v),
        dstOff: toFunction(op.dst.offset, v),
        len: toFunction(op.src.length, v),
        dstLen: toFunction(op.dst.length, v),
        slot: op.signal?.slot ?? -1,
        slotRank: op.signal?.rank ?? -1,
      })),
    ),
  );
}

/** The slot of a row of the moved tensor at M rows: `world` slabs of m = M / world rows, `split` chunks of ⌈m / split⌉ each. */
export function chunkSlotOfRow(M: number, world: number, split: number): (row: number) => number {
  const m = M / world;
  const cs = Math.ceil(m / split);
  return (row) => Math.floor(row / m) * split + Math.floor((row % m) / cs);
}

/** Names the row count and what breaks a rows plan there. */
export type RowsFail = (M: number, what: string) => never;

/** Checks that rank `r`'s row intervals `parts` tile [0, M) exactly once; `twice` ends the message of a row met twice. */
export function checkRowsTiled(fail: RowsFail, M: number, r: number, parts: [number, number][], twice = ""): void {
  let next = 0;
  for (const [lo, hi] of [...parts].sort((a, b) => a[0] - b[0])) {
    if (lo !== next)
      fail(
        M,
        `rank ${r} ${lo < next ? `receives row ${lo} twice${twice === "" ? "" : ` ${twice}`}` : `never receives rows ${next}..${lo}`}`,
      );
    next = hi;
  }
  if (next !== M) fail(M, `rank ${r} never receives rows ${next}..${M}`);
}

/** One rank's consumer at one M, as {@link checkConsumerVisits} checks it. */
export interface ConsumerAt {
  readonly M: number;
  readonly rank: number;
  readonly blockM: number;
  /** m-blocks at M. */
  readonly blocks: number;
  /** The order and slot maps as functions of (M, rank, step or m-block). */
  readonly order: (M: number, r: number, i: number) => number;
  readonly slots: readonly ((M: number, r: number, b: number) => number)[];
  /** The slot of a row of the consumed buffer. */
  readonly slotOfRow: (row: number) => number;
  /** The slots the host ops write on this rank. */
  readonly written: Uint8Array;
}

/**
 * Checks that the rank's order visits every m-block once and that every m-block waits exactly on the slots its rows
 * meet for which `waited(slot)` holds, each written by some host op.
 */
export function checkConsumerVisits(fail: RowsFail, c: ConsumerAt, waited: (slot: number) => boolean): void {
  const { M, rank: r, blockM: BM, blocks: nb } = c;
  const seen = new Uint8Array(nb);
  for (let i = 0; i < nb; i++) {
    const b = c.order(M, r, i);
    if (!(b >= 0 && b < nb) || seen[b]) fail(M, `rank ${r} visits m-block ${b} at step ${i}`);
    seen[b] = 1;
  }
  for (let b = 0; b < nb; b++) {
    // Chunks are contiguous runs of rows in slot order: a block meets every slot from its first row's to its last's.
    const want = new Set<number>();
    for (let g = c.slotOfRow(b * BM); g <= c.slotOfRow(Math.min((b + 1) * BM, M) - 1); g++) if (waited(g)) want.add(g);
    const got = new Set(c.slots.map((f) => f(M, r, b)).filter((x) => x >= 0));
    if (got.size !== want.size || [...want].some((x) => !got.has(x))) {
      fail(M, `rank ${r} m-block ${b} waits on [${[...got].join(", ")}], its rows need [${[...want].join(", ")}]`);
    }
    for (const x of got) if (!c.written[x]) fail(M, `rank ${r} m-block ${b} waits on slot ${x}, which nothing writes`);
  }
}

/** `Operator.rows` resolved against the world and the tile: the shape the maps are built for. */
export function rowsShape(req: RowsRequest, world: number, blockM: number, K: number): AgRowsShape {
  const split = req.split ?? 2;
  if (!Number.isSafeInteger(split) || split < 1) throw new EmitError("bad-param", `rows.split must be a positive integer, got ${split}`);
  const least = world * minRowsPerRank(split, blockM);
  const min = req.min ?? Math.ceil(least / world) * world;
  const max = req.max ?? Math.max(min, 32768 - (32768 % world));
  return { world, split, blockM, K, min, max };
}
