// AllToAll+GEMM for any row count: M, every rank's rows (its send buffer and its output), is a run-time argument.
// Rank r's received rows are slab q = rows q·m … (q+1)·m (m = M / world) from rank q, where they were slab r of q's
// send buffer; each slab moves in `split` chunks of cs = ⌈m / split⌉ rows, chunk c of slab q signalled in slot
// q·split + c of the receiving rank, its own slab by a local copy like the others. The consumer's maps are
// AllGather+GEMM's (`../ag-gemm/rows.ts`) over the received rows, except that an m-block waits on the chunks of its own
// slab too. Host ops, order and slots are @ovl/mapping expressions of M (`ovl_rows`), checked at every M served
// (`checkA2aGemmRows`) before they are written.
import { mul, toFunction } from "@ovl/mapping";
import type { Rows, RowsSegment } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import { DOMAIN_VARIABLE, RANK_VARIABLE } from "../../local/program.js";
import {
  agRowsMaps,
  checkConsumerVisits,
  chunkSlotOfRow,
  rowsCopies,
  checkRowsTiled,
  ROWS_VARIABLE,
  type AgRowsMaps,
  type AgRowsShape,
  type RowsFail,
} from "../ag-gemm/rows.js";

/** The maps of an AllToAll+GEMM over M rows: AllGather+GEMM's, every chunk (the own slab's too) waited on. */
export function a2aRowsMaps(s: AgRowsShape): AgRowsMaps {
  return agRowsMaps(s, true);
}

/**
 * The AllToAll's host ops over M: rank r copies chunk c of slab r of rank q's send buffer `send` into chunk c of slab
 * q of its own received buffer `recv`, with a signal in its slot q·split + c; its own slab first, then r+1's, r+2's, …
 * (the order of the per-M plan `allToAll`).
 */
export function a2aRowsHostOps(s: AgRowsShape, maps: AgRowsMaps, send: string, recv: string): Rows["hostOps"] {
  const { world: W, split: S, K } = s;
  return Array.from({ length: W }, (_, r) => ({
    rank: r,
    streams: [
      {
        name: "comm0",
        ops: Array.from({ length: W * S }, (_, i) => {
          const q = (r + Math.floor(i / S)) % W;
          const c = i % S;
          const from = maps.chunk(r, c); // slab r of the sender's rows
          const to = maps.chunk(q, c); // slab q of the received rows
          const seg = (buffer: string, rank: number, start: typeof from.start): RowsSegment => ({
            buffer,
            rank,
            offset: mul(start, K),
            length: mul(to.rows, K),
          });
          return {
            kind: "copy" as const,
            src: seg(send, q, from.start),
            dst: seg(recv, r, to.start),
            signal: { rank: r, slot: q * S + c },
          };
        }),
      },
    ],
  }));
}

/**
 * Checks, at every M of the range, that the host ops deliver to each rank r, exactly once, every row of its received
 * buffer: rows q·m + j (j < m) from row r·m + j of rank q's send buffer, each copy inside one chunk and signalled on
 * rank r in that chunk's slot, every slot of a rank written once per launch; and that each rank's order visits every
 * m-block once and every m-block waits exactly on the chunks its rows meet. Returns how many row counts were checked.
 * @throws {EmitError} `bad-schedule` naming the first M, rank and block or op that breaks it.
 */
export function checkA2aGemmRows(s: AgRowsShape, maps: AgRowsMaps, hostOps: Rows["hostOps"]): number {
  const { world: W, split: S, blockM: BM, K } = s;
  const v = [ROWS_VARIABLE, RANK_VARIABLE, DOMAIN_VARIABLE.consumer];
  const order = toFunction(maps.order, v);
  const slots = maps.slots.map((e) => toFunction(e, v));
  const blocks = toFunction(maps.numPidM, v);
  const ops = rowsCopies(hostOps);
  const fail: RowsFail = (M, what) => {
    throw new EmitError("bad-schedule", `AllToAll+GEMM over ${M} rows: ${what}`);
  };
  let checked = 0;
  for (let M = s.min; M <= s.max; M += W) {
    checked += 1;
    const m = M / W;
    const slotOfRow = chunkSlotOfRow(M, W, S);
    const received: [number, number][][] = Array.from({ length: W }, () => []);
    const written = Array.from({ length: W }, () => new Uint8Array(W * S));
    for (const op of ops) {
      const [src, dst, len] = [op.srcOff(M, 0, 0), op.dstOff(M, 0, 0), op.len(M, 0, 0)];
      if (len !== op.dstLen(M, 0, 0)) fail(M, `a copy from rank ${op.src} to rank ${op.dst} changes length`);
      if (len <= 0 || src % K || dst % K || len % K) fail(M, `a copy from rank ${op.src} is not whole rows (offset ${src}, length ${len})`);
      if (op.issuer !== op.dst) fail(M, `rank ${op.issuer} issues a copy into rank ${op.dst}'s rows`);
      const [lo, hi] = [dst / K, (dst + len) / K];
      // Slab q of the received rows is slab r of q's send buffer, at the same place within the slab.
      if (Math.floor(lo / m) !== op.src || Math.floor((hi - 1) / m) !== op.src)
        fail(M, `rank ${op.dst} receives rows ${lo}..${hi} from rank ${op.src}, whose slab is rows ${op.src * m}..${(op.src + 1) * m}`);
      if (src / K - op.dst * m !== lo - op.src * m)
        fail(M, `rank ${op.dst}'s rows ${lo}..${hi} come from rank ${op.src}'s row ${src / K}, not ${op.dst * m + lo - op.src * m}`);
      if (op.slotRank !== op.dst || slotOfRow(lo) !== op.slot || slotOfRow(hi - 1) !== op.slot) {
        fail(M, `the copy of rows ${lo}..${hi} to rank ${op.dst} signals slot ${op.slot} of rank ${op.slotRank}`);
      }
      if (written[op.dst]![op.slot]) fail(M, `slot ${op.slot} of rank ${op.dst} is written twice`);
      written[op.dst]![op.slot] = 1;
      received[op.dst]!.push([lo, hi]);
    }
    const nb = blocks(M, 0, 0);
    if (nb !== Math.ceil(M / BM)) fail(M, `${nb} m-blocks`);
    for (let r = 0; r < W; r++) {
      // Every received row exactly once, its own slab's too: the sorted intervals tile [0, M).
      checkRowsTiled(fail, M, r, received[r]!);
      checkConsumerVisits(fail, { M, rank: r, blockM: BM, blocks: nb, order, slots, slotOfRow, written: written[r]! }, () => true);
    }
  }
  return checked;
}
