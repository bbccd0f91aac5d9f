// GEMM + AllReduce, partitioned (AutoOverlap Fig. 4d): the GEMM+ReduceScatter stages
// (producer, deliveries into each slab owner's `partials`), then `ar-reduce` summing each
// rank's slab straight into its rows of the full output and signalling every reduced
// m-block, and an AllGather that sends each chunk of reduced rows to every peer as soon as
// its m-blocks are signalled (copy-engine pushes with stream-written signals), or, over SM stores,
// `ar-reduce-broadcast` storing each summed tile into every rank's output itself, or, over NVSHMEM,
// GEMM+RS's slab puts, `ar-reduce`, and a second `nvshmem-push` kernel putting each reduced m-block to every peer.
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import {
  AR_REDUCE,
  AR_REDUCE_BROADCAST,
  arReduceBroadcastSource,
  arReduceSource,
  checkRsReduceParams,
  nvshmemPushSource,
  nvshmemSlot,
  nvshmemSlotCount,
  rsReduceGrid,
} from "../../backends/triton/kernels/index.js";
import { nvshmemPushKernel } from "../../backends/triton/nvshmem.js";
import type { EmittedFile } from "../../core/result.js";
import { type NvshmemRow, nvshmemPushTable } from "../gemm-rs/problem.js";
import { MANIFEST_SCHEMA, type Buffer, type HostOp, type Kernel, type RankHostOps, type Table } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import type { EmitResult } from "../../core/result.js";
import { AR_PLANS, type Gather } from "./movements.js";
import { checkDistinctBuffers, kernelEntry, signalBuffer, SIGNAL_BUFFER, slotWaitStage } from "../../backends/triton/common.js";
import { gemmRsStages, GEMM_RS_BUFFERS, type ProducerFactory, type RsStages, slabReduceArgs } from "../gemm-rs/template.js";
import type { EmitOptions, ResolvedOptions } from "../../core/options.js";
import { sendOrder } from "../../schedule/rs-movements.js";

/** The manifest-name suffix of each transfer backend. */
const BACKEND_TAG = { "copy-engine": "ce", sm: "sm", nvshmem: "nvshmem" } as const;
import { validated } from "../../core/manifest/validate.js";

/** Buffers of a GEMM+AllReduce manifest besides the partial tensor and the signals. */
export const GEMM_AR_BUFFERS = { a: GEMM_RS_BUFFERS.a, b: GEMM_RS_BUFFERS.b, partials: GEMM_RS_BUFFERS.partials, out: "ar_out" } as const;

/** GEMM+AllReduce's copy-engine AllGather host stream, and the last wait for the rows peers send (a host stream over the copy engine, a `slot-wait` kernel over SM stores or NVSHMEM puts). */
export const AR_STREAMS = { gather: "allgather", done: "ar_done" } as const;

/**
 * `BLOCK_N` of `ar-reduce-broadcast` unless `options.reduceBlockN` names one: 128×64 tiles beat 128×128 by 2–5%
 * (geometric mean of MLP-1…6) through the torch API on four H100s in three A/B pairs at world 4, and tie at world 2
 * (evidence: `results/runs/gemm-ar-sm-h100x4-2026-11-27`, its `run4-broadcast-launch` and `run5-n64-ab`).
 */
export const AR_BROADCAST_BLOCK_N = 64;

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
 * Slots: those of the GEMM+RS stages (`S` of them: arrivals, tile-done), then
 * - `sm`: `S + q` on rank r, per rank q: q's reduced tiles stored into r's output. One kernel,
 *   `ar-reduce-broadcast` (compute stream, after the producer, on every SM, `BLOCK_M × 64` tiles
 *   unless `options.reduceBlockN` says: {@link AR_BROADCAST_BLOCK_N}), reduces the rank's
 *   slab and stores each summed tile into every rank's output, notifying each peer: the
 *   AllGather is its stores, and the half of the AllReduce that cannot overlap the GEMM runs on
 *   the whole GPU. Then `ar_done`, a `slot-wait` kernel, waits for every peer's slab (no host
 *   waits: a CUDA graph captures the launch). The AllGather half must send every slab whole to
 *   every peer (the partitioned plan's).
 * - `copy-engine`: `S + mb` per m-block `mb` of this rank's slab (reduced: `ar-reduce` adds 1 per
 *   finished tile, so `cdiv(N, reduce BLOCK_N)` per launch), then `S + B + k` for the k-th chunk
 *   (by rows) that peers send this rank. Rank q's host stream `allgather` takes its chunks by
 *   rows, each after a wait on the reduced slots of its m-blocks, and copies it to every
 *   destination (peers `q+1, q+2, …` in turn), each copy followed by a write of the
 *   destination's chunk slot; its stream `ar_done` waits on the chunk slots it receives.
 * - `nvshmem`: the slab pushes are `nvshmem-push` rows (the GEMM+RS stages'), `ar-reduce` sums
 *   the rank's slab into its rows of `ar_out` and notifies `S + mb` per m-block (as over the copy
 *   engine), and a second `nvshmem-push` kernel, `nvshmem_push_ar` (comm stream, after the
 *   first; table `ar_segments`), puts each reduced m-block from the local `ar_out` to every
 *   peer's `ar_out` once `S + mb` has its `cdiv(N, reduce BLOCK_N)` arrivals, adding 1 to the
 *   peer's 64-bit signal word `R + 2q` (R = the first even slot after `S + B`); `ar_done`, a
 *   `slot-wait` kernel, waits on `R + 2q` for `B` arrivals per peer q. No peer pointers, no
 *   host ops: the runner's NVSHMEM sessions take it.
 * Every way a launch ends with the rank's whole output in place.
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
  const { M, N, K } = params;
  const reducedBase = s.slots;
  const buffers: Buffer[] = [...s.buffers, { name: GEMM_AR_BUFFERS.out, shape: [M, N], dtype: o.dtype, symmetric: true, init: "poison" }];
  const tables: Table[] = [...s.tables];
  const kernels: Kernel[] = [...s.kernels];
  const files = [...s.files];
  let slots: number;
  let hostOps: RankHostOps[];
  if (o.backend === "sm") {
    // One pass reduces this rank's slab and stores it into every rank's output; slot
    // `S + q` on rank r counts the tiles of q's slab stored there.
    checkWholeSlabGathers(gathers, world, rowsPerRank);
    const bcast = checkRsReduceParams({ ...s.reduce, BLOCK_N: options.reduceBlockN ?? AR_BROADCAST_BLOCK_N });
    const tilesPerSlab = blocksPerSlab * Math.ceil(N / bcast.BLOCK_N);
    slots = reducedBase + world;
    const { out_ptr: _out, ...reduceArgs } = slabReduceArgs(GEMM_AR_BUFFERS.out, s.tensor.name, bcast);
    kernels.push(
      kernelEntry(AR_REDUCE_BROADCAST, {
        name: "ar_reduce_broadcast",
        stream: "compute",
        grid: rsReduceGrid(bcast, o.reducePrograms),
        numWarps: 4,
        numStages: 1,
        args: {
          ...reduceArgs,
          out_ptrs: { kind: "peer-pointers", buffer: GEMM_AR_BUFFERS.out },
          sig_ptrs: { kind: "peer-pointers", buffer: SIGNAL_BUFFER },
          recv_base: { kind: "int", value: reducedBase },
        },
        constexprs: { WORLD: world, BLOCK_M: bcast.BLOCK_M, BLOCK_N: bcast.BLOCK_N },
        params: { ...bcast, recv_base: reducedBase },
      }),
    );
    files.push({ path: "ar_reduce_broadcast.py", text: arReduceBroadcastSource(bcast, { dtype: o.dtype }) });
    const waits = Array.from({ length: world }, (_, r) =>
      Array.from({ length: world }, (_, q) => q)
        .filter((q) => q !== r)
        .map((q) => [reducedBase + q, tilesPerSlab]),
    );
    const wait = slotWaitStage(AR_STREAMS.done, waits, o.dtype);
    tables.push(wait.table);
    kernels.push(wait.kernel);
    files.push(wait.file);
    hostOps = s.hostOps;
  } else if (o.backend === "nvshmem") {
    checkWholeSlabGathers(gathers, world, rowsPerRank, "nvshmem");
    const nv = nvshmemAllGather(s, o);
    slots = nv.slots;
    tables.push(...nv.tables);
    kernels.push(...nv.kernels);
    files.push(...nv.files);
    hostOps = s.hostOps;
  } else {
    const ce = copyEngineAllGather(s, gathers, o);
    slots = ce.slots;
    kernels.push(ce.reduce);
    files.push(ce.file);
    hostOps = ce.hostOps;
  }
  buffers.push(signalBuffer(slots, o.backend === "copy-engine"));
  checkDistinctBuffers(buffers);
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: options.name ?? `gemm_ar_${BACKEND_TAG[o.backend]}`,
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

/**
 * Refuses an AllGather half that does not send every rank's whole slab to every peer: the SM
 * realisation stores each reduced tile into every rank's output, and the NVSHMEM one puts each
 * reduced m-block to every peer, so they realise exactly that one.
 * @throws {EmitError} `unsupported-op`.
 */
export function checkWholeSlabGathers(
  gathers: readonly Gather[],
  world: number,
  rowsPerRank: number,
  backend: "sm" | "nvshmem" = "sm",
): void {
  for (let q = 0; q < world; q++) {
    for (let r = 0; r < world; r++) {
      if (r === q) continue;
      const rows = gathers
        .filter((g) => g.from === q && g.to === r)
        .sort((a, b) => a.row0 - b.row0)
        .reduce((next, g) => (g.row0 === next ? next + g.rows : Number.NaN), q * rowsPerRank);
      if (rows !== (q + 1) * rowsPerRank) {
        throw new EmitError(
          "unsupported-op",
          `the AllGather half does not carry rank ${q}'s whole slab (rows ${q * rowsPerRank}..${(q + 1) * rowsPerRank}) to rank ${r} once; ${backend === "sm" ? "over SM stores" : "over NVSHMEM puts"} every reduced slab goes to every peer: use ${AR_PLANS.partitioned}, or options.backend "copy-engine" for another AllGather`,
        );
      }
    }
  }
}

/** The NVSHMEM AllGather half: the put kernel, its table, `ar-reduce` and `ar_done`. */
interface NvshmemGather {
  readonly slots: number;
  readonly tables: Table[];
  readonly kernels: Kernel[];
  readonly files: EmittedFile[];
}

/** The kernel and table of the NVSHMEM AllGather's puts of reduced m-blocks. */
export const AR_NVSHMEM_PUSH = { name: "nvshmem_push_ar", table: "ar_segments" } as const;

/**
 * The NVSHMEM realisation of the AllGather half (see {@link emitGemmArPartitioned}): `ar-reduce`
 * notifying int32 slot `S + mb` per reduced tile of m-block `mb`, `nvshmem_push_ar` putting each
 * reduced m-block (`BLOCK_M` whole rows of `ar_out`, contiguous) to every peer with a signal add on
 * the peer's word `R + 2q` (q = this rank), peers in send order (`q+1, q+2, …`) per m-block, and
 * `ar_done` waiting on `R + 2q` for `B` arrivals per peer q.
 */
function nvshmemAllGather(s: RsStages, o: ResolvedOptions): NvshmemGather {
  const { world, params, rowsPerRank, blocksPerSlab } = s;
  const { N, BLOCK_M } = params;
  const doneBase = s.slots;
  // The receive words start on an even int32 slot: a 64-bit NVSHMEM signal word (`nvshmemSlot`).
  const recvBase = nvshmemSlotCount(Math.ceil((doneBase + blocksPerSlab) / 2));
  const recvSlot = (from: number) => recvBase + nvshmemSlot(from);
  const slots = recvBase + nvshmemSlotCount(world);
  const perMBlock = Math.ceil(N / s.reduce.BLOCK_N);
  const mBlockElems = BLOCK_M * N;
  const rows = Array.from({ length: world }, (_, q) =>
    Array.from({ length: blocksPerSlab }, (_, mb) =>
      Array.from({ length: world - 1 }, (_, k): NvshmemRow => {
        const at = (q * rowsPerRank + mb * BLOCK_M) * N;
        return [at, (q + 1 + k) % world, at, mBlockElems, doneBase + mb, perMBlock, recvSlot(q)];
      }),
    ).flat(),
  );
  const push = nvshmemPushTable(AR_NVSHMEM_PUSH.table, rows, slots);
  const reduce = arReduceStage(s, o, doneBase);
  const waits = Array.from({ length: world }, (_, r) =>
    Array.from({ length: world }, (_, q) => q)
      .filter((q) => q !== r)
      .map((q) => [recvSlot(q), blocksPerSlab]),
  );
  const wait = slotWaitStage(AR_STREAMS.done, waits, o.dtype);
  return {
    slots,
    tables: [push.table, wait.table],
    kernels: [nvshmemPushKernel(o, GEMM_AR_BUFFERS.out, GEMM_AR_BUFFERS.out, push.count, AR_NVSHMEM_PUSH), reduce.kernel, wait.kernel],
    files: [{ path: `${AR_NVSHMEM_PUSH.name}.py`, text: nvshmemPushSource({ dtype: o.dtype }) }, reduce.file, wait.file],
  };
}

/**
 * `ar-reduce`, the reduction of the copy-engine and nvshmem AllGather halves: each rank's slab reduced into its own
 * `ar_out`, one arrival per finished tile on the local slot `doneBase + mb` of its m-block.
 */
function arReduceStage(s: RsStages, o: ResolvedOptions, doneBase: number): { kernel: Kernel; file: { path: string; text: string } } {
  const kernel = kernelEntry(AR_REDUCE, {
    name: "ar_reduce",
    stream: "compute",
    grid: rsReduceGrid(s.reduce, o.reducePrograms),
    numWarps: 4,
    numStages: 1,
    args: { ...slabReduceArgs(GEMM_AR_BUFFERS.out, s.tensor.name, s.reduce), done_base: { kind: "int", value: doneBase } },
    constexprs: { WORLD: s.world, BLOCK_M: s.reduce.BLOCK_M, BLOCK_N: s.reduce.BLOCK_N },
    params: { ...s.reduce, done_base: doneBase },
  });
  return { kernel, file: { path: "ar_reduce.py", text: arReduceSource(s.reduce, { dtype: o.dtype }) } };
}

/** The copy-engine AllGather half: `ar-reduce`, host streams that send each chunk once its m-blocks are reduced, and `ar_done`. */
interface CopyEngineGather {
  readonly slots: number;
  readonly reduce: Kernel;
  readonly file: { path: string; text: string };
  readonly hostOps: RankHostOps[];
}

/**
 * The copy-engine realisation of the AllGather half (see {@link emitGemmArPartitioned}): slot
 * `S + mb` per m-block of this rank's slab (reduced), `S + B + k` per chunk peers send it.
 */
function copyEngineAllGather(s: RsStages, gathers: readonly Gather[], o: ResolvedOptions): CopyEngineGather {
  const { world, params, rowsPerRank, blocksPerSlab } = s;
  const { N, BLOCK_M } = params;
  const reducedBase = s.slots;
  const perMBlock = Math.ceil(N / s.reduce.BLOCK_N);
  // The chunks each rank receives, by rows: their slots, `S + B + k`.
  const incoming = Array.from({ length: world }, (_, r) =>
    gathers.filter((g) => g.to === r).sort((a, b) => a.row0 - b.row0 || a.from - b.from),
  );
  const chunkBase = reducedBase + blocksPerSlab;
  const chunkSlot = (g: Gather) => chunkBase + incoming[g.to]!.indexOf(g);
  // The m-blocks of the sender's slab that chunk `g` covers (rows need not fall on m-blocks).
  const mBlocksOf = (g: Gather) => {
    const first = Math.floor((g.row0 - g.from * rowsPerRank) / BLOCK_M);
    const last = Math.ceil((g.row0 + g.rows - g.from * rowsPerRank) / BLOCK_M);
    return Array.from({ length: last - first }, (_, k) => first + k);
  };
  const outgoing = (q: number) =>
    gathers.filter((g) => g.from === q).sort((a, b) => a.row0 - b.row0 || sendOrder(a, world) - sendOrder(b, world));
  const reduce = arReduceStage(s, o, reducedBase);
  const rowElems = (rows: number) => rows * N;
  const hostOps = Array.from({ length: world }, (_, q): RankHostOps => {
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
    }
    const done: HostOp[] = incoming[q]!.map((g) => ({ kind: "wait", slot: chunkSlot(g), arrivals: 1 }));
    const streams = [
      ...(s.hostOps.find((h) => h.rank === q)?.streams ?? []),
      ...(ops.length > 0 ? [{ name: AR_STREAMS.gather, ops }] : []),
      ...(done.length > 0 ? [{ name: AR_STREAMS.done, ops: done }] : []),
    ];
    return { rank: q, streams };
  });
  return {
    slots: chunkBase + Math.max(1, ...incoming.map((c) => c.length)),
    reduce: reduce.kernel,
    file: reduce.file,
    hostOps,
  };
}
