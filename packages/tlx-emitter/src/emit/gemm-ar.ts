// GEMM + AllReduce, partitioned (AutoOverlap Fig. 4d): the GEMM+ReduceScatter stages
// (producer, deliveries into each slab owner's `partials`), then `ar-reduce` summing each
// rank's slab straight into its rows of the full output and signalling every reduced
// m-block, and an AllGather that sends each chunk of reduced rows to every peer as soon as
// its m-blocks are signalled: copy-engine pushes with stream-written signals, or SM pushes.
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import {
  AR_REDUCE,
  arReduceSource,
  checkSegmentAlignment,
  checkSmCommParams,
  rsReduceGrid,
  SM_PUSH,
  SM_PUSH_FIELDS,
  smPushSource,
} from "../kernels/index.js";
import { MANIFEST_SCHEMA, type Buffer, type HostOp, type Kernel, type RankHostOps, type Table } from "../manifest/schema.js";
import { EmitError } from "../writer/index.js";
import type { EmitResult } from "./ag-gemm.js";
import { AR_PLANS, type Gather } from "./ar-movements.js";
import { checkDistinctBuffers, commGrid, kernelEntry, signalBuffer, SIGNAL_BUFFER } from "./common.js";
import { gemmRsStages, GEMM_RS_BUFFERS, type ProducerFactory, slabReduceArgs } from "./gemm-rs.js";
import type { EmitOptions } from "./options.js";
import { sendOrder } from "./rs-movements.js";
import { validated } from "./validate.js";

/** Buffers of a GEMM+AllReduce manifest besides the partial tensor and the signals. */
export const GEMM_AR_BUFFERS = { a: GEMM_RS_BUFFERS.a, b: GEMM_RS_BUFFERS.b, partials: GEMM_RS_BUFFERS.partials, out: "ar_out" } as const;

/** Host streams of GEMM+AllReduce: the copy-engine AllGather, and the wait for the rows peers send. */
export const AR_STREAMS = { gather: "allgather", done: "ar_done" } as const;

/** The reference of a GEMM+AllReduce manifest: every rank's output is Σ_ranks A_r @ B_r, all M rows. */
export function gemmArReference(M: number, N: number, K: number, tolerance: number) {
  return {
    operator: "gemm-ar" as const,
    M,
    N,
    K,
    inputs: { A: GEMM_AR_BUFFERS.a, B: GEMM_AR_BUFFERS.b },
    output: GEMM_AR_BUFFERS.out,
    tolerance,
  };
}

/**
 * Emit the partitioned GEMM+AllReduce: `reduceScatter` is the ReduceScatter half of the plan
 * (ops reading the partial tensor, see `allReduceForm`), `schedule` its producer schedule,
 * `gathers` the AllGather half's chunks. Output `ar_out` `[M, N]` (symmetric) on every rank.
 * Slots: those of the GEMM+RS stages (`S` of them: arrivals, tile-done), then `S + mb` per
 * m-block `mb` of this rank's slab (reduced: `ar-reduce` adds 1 per finished tile, so
 * `cdiv(N, reduce BLOCK_N)` per launch), then `S + B + k` for the k-th chunk (by rows) that
 * peers send this rank (copy engine: written once; `sm`: once per m-block segment of it).
 * - `copy-engine`: rank q's host stream `allgather` takes its chunks by rows, each after a
 *   wait on the reduced slots of its m-blocks, and copies it to every destination (peers
 *   `q+1, q+2, …` in turn), each copy followed by a write of the destination's chunk slot.
 * - `sm`: a second `sm-push` kernel on the comm stream, one segment per (chunk, m-block).
 * Every rank's stream `ar_done` waits on the chunk slots it receives, so its launch ends
 * with its whole output in place.
 * @throws {EmitError} as `emitGemmRs` (naming the nearest GEMM+AllReduce plans).
 */
export function emitGemmArPartitioned(
  reduceScatter: ChunkPlan,
  schedule: TileSchedule,
  gathers: readonly Gather[],
  options: EmitOptions = {},
  producer?: ProducerFactory,
): EmitResult {
  const s = gemmRsStages(reduceScatter, schedule, options, producer, {
    nearest: `use ${AR_PLANS.partitioned} (a ReduceScatter of whole slabs), or ${AR_PLANS.tilewise}, which takes any M`,
    operator: "gemm-ar",
  });
  const { o, world, params, rowsPerRank, blocksPerSlab } = s;
  const { M, N, K, BLOCK_M } = params;
  const reducedBase = s.slots;
  const perMBlock = Math.ceil(N / s.reduce.BLOCK_N);
  // The chunks each rank receives, by rows: their slots, `S + B + k`.
  const incoming = Array.from({ length: world }, (_, r) =>
    gathers.filter((g) => g.to === r).sort((a, b) => a.row0 - b.row0 || a.from - b.from),
  );
  const chunkBase = reducedBase + blocksPerSlab;
  const chunkSlot = (g: Gather) => chunkBase + incoming[g.to]!.indexOf(g);
  const slots = chunkBase + Math.max(1, ...incoming.map((c) => c.length));
  // The m-blocks of the sender's slab that chunk `g` covers (rows need not fall on m-blocks).
  const mBlocksOf = (g: Gather) => {
    const first = Math.floor((g.row0 - g.from * rowsPerRank) / BLOCK_M);
    const last = Math.ceil((g.row0 + g.rows - g.from * rowsPerRank) / BLOCK_M);
    return Array.from({ length: last - first }, (_, k) => first + k);
  };
  const outgoing = (q: number) =>
    gathers.filter((g) => g.from === q).sort((a, b) => a.row0 - b.row0 || sendOrder(a, world) - sendOrder(b, world));

  const buffers: Buffer[] = [
    ...s.buffers,
    { name: GEMM_AR_BUFFERS.out, shape: [M, N], dtype: o.dtype, symmetric: true, init: "poison" },
    signalBuffer(slots, true),
  ];
  checkDistinctBuffers(buffers);
  const tables: Table[] = [...s.tables];
  const kernels: Kernel[] = [
    ...s.kernels,
    kernelEntry(AR_REDUCE, {
      name: "ar_reduce",
      stream: "compute",
      grid: rsReduceGrid(s.reduce, o.reducePrograms),
      numWarps: 4,
      numStages: 1,
      args: { ...slabReduceArgs(GEMM_AR_BUFFERS.out, s.tensor.name, s.reduce), done_base: { kind: "int", value: reducedBase } },
      constexprs: { WORLD: world, BLOCK_M: s.reduce.BLOCK_M, BLOCK_N: s.reduce.BLOCK_N },
      params: { ...s.reduce, done_base: reducedBase },
    }),
  ];
  const files = [...s.files, { path: "ar_reduce.py", text: arReduceSource(s.reduce, { dtype: o.dtype }) }];
  const rowElems = (rows: number) => rows * N;
  // Per chunk slot, how many writes complete it (1 by the copy engine; its segments with SM pushes).
  const chunkArrivals = new Map<string, number>();
  const gatherOps: RankHostOps[] = [];
  if (o.backend === "copy-engine") {
    for (let q = 0; q < world; q++) {
      const ops: HostOp[] = [];
      const waited = new Set<number>();
      for (const g of outgoing(q)) {
        for (const mb of mBlocksOf(g)) {
          if (waited.has(mb)) continue;
          waited.add(mb);
          ops.push({ kind: "wait", slot: reducedBase + mb, arrivals: perMBlock });
        }
        const at = { offset: rowElems(g.row0), length: rowElems(g.rows) };
        ops.push({
          kind: "copy",
          src: { buffer: GEMM_AR_BUFFERS.out, rank: q, ...at },
          dst: { buffer: GEMM_AR_BUFFERS.out, rank: g.to, ...at },
          signal: { rank: g.to, slot: chunkSlot(g) },
        });
        chunkArrivals.set(`${g.to}:${chunkSlot(g)}`, 1);
      }
      gatherOps.push({ rank: q, streams: ops.length > 0 ? [{ name: AR_STREAMS.gather, ops }] : [] });
    }
  } else {
    const comm = checkSmCommParams({ BLOCK: o.commBlock });
    const rows = Array.from({ length: world }, (_, q) =>
      outgoing(q).flatMap((g) =>
        mBlocksOf(g).map((mb) => {
          // The part of the chunk inside m-block mb of the sender's slab.
          const lo = Math.max(g.row0, g.from * rowsPerRank + mb * BLOCK_M);
          const hi = Math.min(g.row0 + g.rows, g.from * rowsPerRank + (mb + 1) * BLOCK_M);
          const key = `${g.to}:${chunkSlot(g)}`;
          chunkArrivals.set(key, (chunkArrivals.get(key) ?? 0) + 1);
          return [rowElems(lo), g.to, rowElems(lo), rowElems(hi - lo), reducedBase + mb, perMBlock, chunkSlot(g)];
        }),
      ),
    );
    for (const r of rows) checkSegmentAlignment(r.flat(), SM_PUSH_FIELDS, ["src_offset", "dst_offset"], o.dtype);
    const count = Math.max(1, ...rows.map((r) => r.length));
    const padded = rows.map((r) => [...r, ...Array.from({ length: count - r.length }, () => [0, 0, 0, 0, -1, 0, -1])].flat());
    tables.push({ name: "gather_segments", dtype: "int64", values: padded });
    kernels.push(
      kernelEntry(SM_PUSH, {
        name: "sm_push_gather",
        stream: "comm",
        grid: commGrid(o.commSms, count),
        numWarps: o.commWarps,
        numStages: 1,
        args: {
          src_ptr: { kind: "buffer", name: GEMM_AR_BUFFERS.out },
          dst_ptrs: { kind: "peer-pointers", buffer: GEMM_AR_BUFFERS.out },
          sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
          sig_ptrs: { kind: "peer-pointers", buffer: SIGNAL_BUFFER },
          seg_ptr: { kind: "table", name: "gather_segments" },
          num_segments: { kind: "int", value: count },
          err_ptr: { kind: "error-buffer" },
          rank: { kind: "rank" },
          epoch_ptr: { kind: "epoch-word" },
          timeout_ns: { kind: "timeout-ns" },
        },
        constexprs: { BLOCK: comm.BLOCK },
        params: { BLOCK: comm.BLOCK, segments: count },
      }),
    );
    // The RS half's sm_push.py is the same module; a second file keeps one source per kernel.
    files.push({ path: "sm_push_gather.py", text: smPushSource(comm, { dtype: o.dtype }) });
  }
  const hostOps: RankHostOps[] = Array.from({ length: world }, (_, r) => {
    const own = [...(s.hostOps.find((h) => h.rank === r)?.streams ?? []), ...(gatherOps.find((h) => h.rank === r)?.streams ?? [])];
    const done: HostOp[] = incoming[r]!.map((g) => {
      const arrivals = chunkArrivals.get(`${r}:${chunkSlot(g)}`);
      if (arrivals === undefined) throw new EmitError("bad-plan", `rank ${r}: no transfer signals the chunk of rows ${g.row0}..`);
      return { kind: "wait", slot: chunkSlot(g), arrivals };
    });
    return { rank: r, streams: done.length > 0 ? [...own, { name: AR_STREAMS.done, ops: done }] : own };
  });
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: options.name ?? `gemm_ar_${o.backend === "sm" ? "sm" : "ce"}`,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots, bits: 32 },
    tables,
    kernels,
    hostOps,
    reference: gemmArReference(M, N, K, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  return { files, manifest };
}
