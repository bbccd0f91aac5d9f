// GEMM + ReduceScatter (TileLink's GEMM+RS, AutoOverlap's producer side): a producer GEMM
// storing tiles locally and notifying tile-done slots, deliveries of finished partial
// rows into each slab owner's symmetric `partials` (copy engine or an `sm-push` kernel),
// and `rs-reduce` summing the delivered slabs as each (rank, m-block) arrives.
import type { ChunkPlan, TensorDecl, TileSchedule } from "@ovl/chunk-plan";
import {
  checkNvshmemRows,
  checkRsReduceParams,
  checkSegmentAlignment,
  checkSmCommParams,
  type GemmParams,
  nvshmemPushSource,
  nvshmemSlot,
  nvshmemSlotCount,
  RS_REDUCE,
  type RsReduceParams,
  rsReduceBlockN,
  rsReduceGrid,
  rsReduceSource,
  SM_PUSH,
  SM_PUSH_FIELDS,
  type SmCommParams,
  smPushSource,
} from "../../backends/triton/kernels/index.js";
import {
  MANIFEST_SCHEMA,
  type Buffer,
  type HostOp,
  type Kernel,
  type KernelArg,
  type RankHostOps,
  type Table,
} from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import type { EmitResult } from "../../core/result.js";
import { checkDistinctBuffers, commGrid, kernelEntry, signalBuffer, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import type { EmittedFile } from "../../core/result.js";
import { nvshmemPushKernel } from "../../backends/triton/nvshmem.js";
import { commStreamName } from "../../schedule/host-ops.js";
import { type EmitOptions, gemmLaunch, resolveOptions, type ResolvedOptions } from "../../core/options.js";
import { producerOrder } from "../../schedule/producer-order.js";
import { arrivalSlot, arrivalSlotTable, rsDeliveries } from "../../schedule/rs-movements.js";
import { validated } from "../../core/manifest/validate.js";
import { refuseFp8Template } from "../../core/dtype.js";
import { sumsInsideNodes } from "../../schedule/rs-hierarchical.js";
import { GEMM_RS_BUFFERS } from "./buffers.js";
import { emitGemmRsHierarchical } from "./hierarchical.js";
import { gemmRsReference, producerTables, rsProblem, segmentTable } from "./problem.js";
import { type ProducerFactory, rsProducer } from "./producer.js";

export type { ProducerContext, ProducerFactory } from "./producer.js";

/** The manifest-name suffix of each transfer backend. */
const BACKEND_TAG = { "copy-engine": "ce", sm: "sm", nvshmem: "nvshmem" } as const;

export { GEMM_RS_BUFFERS } from "./buffers.js";

/**
 * The stages GEMM+ReduceScatter and the partitioned GEMM+AllReduce share: the producer (the
 * template or a transformed body), the deliveries of partial rows into each slab owner's
 * `partials` (copy-engine host ops, or an `sm-push` kernel) and the reduction's parameters
 * and arrival-slot table. Everything after (the reduction kernel, the output buffer, the
 * signal buffer, the manifest) is the operator's.
 */
export interface RsStages {
  readonly o: ResolvedOptions;
  readonly world: number;
  readonly tensor: TensorDecl;
  readonly params: GemmParams;
  readonly rowsPerRank: number;
  readonly blocksPerSlab: number;
  /** Signal slots used by these stages (arrivals, then tile-done); later stages number theirs from here. */
  readonly slots: number;
  /** `gemm_a`, `gemm_b`, the partial tensor and `partials`, in that order. */
  readonly buffers: Buffer[];
  /** The producer's tables, `rs_arrival_slot`, then (`sm`) `push_segments`. */
  readonly tables: Table[];
  /** The producer, then (`sm`) `sm_push`. */
  readonly kernels: Kernel[];
  readonly files: EmittedFile[];
  readonly hostOps: RankHostOps[];
  /** Parameters of the reduction over `partials` (`rs-reduce`, `ar-reduce`). */
  readonly reduce: RsReduceParams;
  /** A precompiled producer's PTX expectations, by kernel name. */
  readonly expect?: Readonly<Record<string, readonly string[]>>;
}

/** What differs when another operator builds on the GEMM+RS stages. */
export interface RsStageOptions {
  /** The nearest plan that works, for refusals of the plan (default: GEMM+RS's own). */
  readonly nearest?: string;
  /** The producer's `template.params.operator` (default `gemm-rs`). */
  readonly operator?: "gemm-rs" | "gemm-ar";
}

/**
 * Emit GEMM+ReduceScatter: per rank `C_partial = A @ B` (`[M,N]`), and rank r's output
 * rows `r·M/W ..` = Σ_q C_partial of rank q. `plan` is a ReduceScatter of the schedule's
 * tensor (e.g. `reduceScatterDirect({afterCompute: true})`), `schedule` its producer
 * schedule. Signal slots: `q·B + mb` (B = m-blocks per slab) = rank q's partial of the
 * chunk starting at m-block mb of this rank's slab has arrived (1 arrival); `W·B + s` =
 * the schedule's tile-done slot s (arrivals = its tile count). The producer computes the
 * m-blocks in sending order (peers' slabs first, its own last: `producerOrder`).
 * - `copy-engine`: per chunk (a plan op's rows), rank q's stream `comm<s>` waits on the
 *   tile-done slots covering it, copies it (contiguous rows) into the owner's
 *   `partials[q]` with one copy and stream-writes the owner's slot once.
 * - `sm`: an `sm-push` kernel on the comm stream does the same per m-block segment row.
 * The plan's local copy of a rank's own partial moves nothing: `rs-reduce` (compute stream,
 * after the producer) reads it in place, waits per peer q and m-block mb on table
 * `rs_arrival_slot`'s slot and sums into `rs_out` (`partials[r]` of rank r stays unused).
 * A plan that sums partials into the partial tensor (`reduceScatterHierarchical`) is emitted by
 * `emitGemmRsHierarchical` (the `nvshmem` backend).
 * @throws {EmitError} when M is not W slabs of whole m-blocks, the schedule is not row
 *   blocked, the plan is not a direct ReduceScatter after compute, or options are bad.
 */
export function emitGemmRs(plan: ChunkPlan, schedule: TileSchedule, options: EmitOptions = {}, producer?: ProducerFactory): EmitResult {
  // A hierarchical ReduceScatter sums partials inside the node first: two reductions, not one.
  if (sumsInsideNodes(plan)) return emitGemmRsHierarchical(plan, schedule, options, producer);
  const s = gemmRsStages(plan, schedule, options, producer);
  const { o, world, params } = s;
  const buffers: Buffer[] = [
    ...s.buffers,
    { name: GEMM_RS_BUFFERS.out, shape: [s.rowsPerRank, params.N], dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(s.slots, o.backend === "copy-engine"),
  ];
  checkDistinctBuffers(buffers);
  const kernels: Kernel[] = [
    ...s.kernels,
    kernelEntry(RS_REDUCE, {
      name: "rs_reduce",
      stream: "compute",
      grid: rsReduceGrid(s.reduce, o.reducePrograms),
      numWarps: 4,
      numStages: 1,
      args: slabReduceArgs(GEMM_RS_BUFFERS.out, s.tensor.name, s.reduce),
      constexprs: { WORLD: world, BLOCK_M: s.reduce.BLOCK_M, BLOCK_N: s.reduce.BLOCK_N },
      params: { ...s.reduce },
    }),
  ];
  const files: EmittedFile[] = [...s.files, { path: "rs_reduce.py", text: rsReduceSource(s.reduce, { dtype: o.dtype }) }];
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: options.name ?? `gemm_rs_${BACKEND_TAG[o.backend]}`,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: s.slots, bits: 32 },
    tables: s.tables,
    kernels,
    hostOps: s.hostOps,
    reference: gemmRsReference(params.M, params.N, params.K, s.rowsPerRank, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  return { files, manifest, ...(s.expect === undefined ? {} : { expect: s.expect }) };
}

/** The push kernels' segment table (`sm-push`'s and `nvshmem-push`'s `push_segments`). */
export const PUSH_SEGMENTS = "push_segments";

/**
 * The `sm_push` kernel on the comm stream: `count` rows of table {@link PUSH_SEGMENTS}, copied from buffer `src`
 * into the peers' `partials` with SM stores (and a signal each) on `o.commSms` programs at most.
 */
export function smPushKernel(o: ResolvedOptions, src: string, count: number, comm: SmCommParams): Kernel {
  return kernelEntry(SM_PUSH, {
    name: "sm_push",
    stream: "comm",
    grid: commGrid(o.commSms, count),
    numWarps: o.commWarps,
    numStages: 1,
    args: {
      src_ptr: { kind: "buffer", name: src },
      dst_ptrs: { kind: "peer-pointers", buffer: GEMM_RS_BUFFERS.partials },
      sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      sig_ptrs: { kind: "peer-pointers", buffer: SIGNAL_BUFFER },
      seg_ptr: { kind: "table", name: PUSH_SEGMENTS },
      num_segments: { kind: "int", value: count },
      err_ptr: { kind: "error-buffer" },
      rank: { kind: "rank" },
      epoch_ptr: { kind: "epoch-word" },
      timeout_ns: { kind: "timeout-ns" },
    },
    constexprs: { BLOCK: comm.BLOCK },
    params: { BLOCK: comm.BLOCK, segments: count },
  });
}

/**
 * The arguments of `rs-reduce` (and, with `done_base`, `ar-reduce`) over `partials` and the rank's
 * own partial tensor `own` (read in place) into `out`.
 */
export function slabReduceArgs(out: string, own: string, reduce: RsReduceParams): Record<string, KernelArg> {
  return {
    part_ptr: { kind: "buffer", name: GEMM_RS_BUFFERS.partials },
    own_ptr: { kind: "buffer", name: own },
    out_ptr: { kind: "buffer", name: out },
    sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
    slot_ptr: { kind: "table", name: "rs_arrival_slot" },
    err_ptr: { kind: "error-buffer" },
    N: { kind: "int", value: reduce.N },
    rank: { kind: "rank" },
    epoch_ptr: { kind: "epoch-word" },
    timeout_ns: { kind: "timeout-ns" },
    rows_per_rank: { kind: "int", value: reduce.rows_per_rank },
  };
}

/**
 * The GEMM+RS stages of `plan` (see {@link RsStages}); `emitGemmRs` documents the plan,
 * the schedule and the slots.
 * @throws {EmitError} as `emitGemmRs`.
 */
export function gemmRsStages(
  plan: ChunkPlan,
  schedule: TileSchedule,
  options: EmitOptions = {},
  producer?: ProducerFactory,
  stage: RsStageOptions = {},
): RsStages {
  const o = resolveOptions(options);
  refuseFp8Template(o.dtype, "GEMM+ReduceScatter");
  const { world, tensor, M, N, K, params, rowsPerRank } = rsProblem(plan, schedule, options, o, stage.nearest);
  const blocksPerSlab = rowsPerRank / params.BLOCK_M;
  const nvshmem = o.backend === "nvshmem";
  // Arrival slot s is int32 slot 2s under NVSHMEM (the low half of a 64-bit signal word, `nvshmemSlot`).
  const arrivalAt = (slot: number) => (nvshmem ? nvshmemSlot(slot) : slot);
  const tileDoneBase = nvshmem ? nvshmemSlotCount(world * blocksPerSlab) : world * blocksPerSlab;
  const { numPidM, numTiles } = schedule.grid;
  const { ranks, tables: perRank } = producerTables(schedule);
  const deliveries = rsDeliveries(plan, schedule, tensor.name, rowsPerRank, stage.nearest);
  // A rank's own partial is reduced where the producer wrote it: only peers' rows move.
  const peerDeliveries = deliveries.filter((d) => d.from !== d.to);
  // The notify table is per m-block, so visiting m-blocks in sending order keeps it valid.
  const order = ranks.map((r) => producerOrder(deliveries, r.rank, numPidM));
  const maxTileDone = Math.max(0, ...ranks.flatMap((r) => r.slots.map((s) => s.slot + 1)));
  const slots = tileDoneBase + maxTileDone;
  const slabElems = rowsPerRank * N;
  const rowsElems = params.BLOCK_M * N;
  const where = (d: { from: number; to: number; mBlock: number }) => ({
    src: d.mBlock * rowsElems,
    dst: d.from * slabElems + (d.mBlock - d.to * blocksPerSlab) * rowsElems,
    slot: arrivalSlot(d, blocksPerSlab),
  });

  const buffers: Buffer[] = [
    { name: GEMM_RS_BUFFERS.a, shape: [M, K], dtype: o.dtype, symmetric: false, init: "random" },
    { name: GEMM_RS_BUFFERS.b, shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" },
    // NVSHMEM puts read their source from the symmetric heap: a network transport reaches only
    // memory registered with it.
    { name: tensor.name, shape: [M, N], dtype: o.dtype, symmetric: nvshmem, init: "poison" },
    { name: GEMM_RS_BUFFERS.partials, shape: [world, rowsPerRank, N], dtype: o.dtype, symmetric: true, init: "poison" },
  ];
  const tables: Table[] = [
    {
      name: "rs_arrival_slot",
      dtype: "int32",
      values: ranks.map((r) =>
        arrivalSlotTable(peerDeliveries, r.rank, world, blocksPerSlab, o.backend !== "copy-engine").map((x) => (x < 0 ? x : arrivalAt(x))),
      ),
    },
  ];
  const gemm = gemmLaunch(o, params);
  // With SM pushes the producer leaves the communication kernel's SMs to it: a persistent
  // program that found no SM free would start only when another finished all its tiles.
  const reserve = o.backend === "copy-engine" ? {} : { reserve: o.commSms };
  const notifyPerMBlock = perRank.map((t) => t.slot.map((s) => (s < 0 ? -1 : tileDoneBase + s)));
  const made = rsProducer(
    {
      order,
      notify: notifyPerMBlock,
      params,
      launch: gemm,
      reserve,
      numTiles,
      numPidN: schedule.grid.numPidN,
      partial: tensor.name,
      a: GEMM_RS_BUFFERS.a,
      b: GEMM_RS_BUFFERS.b,
      options: o,
      operator: stage.operator ?? "gemm-rs",
      // With SM pushes only this rank's sm-push kernel waits on the tile-done slots, and it
      // releases what it moves at system scope itself; a copy-engine delivery waits on a host
      // stream, and an NVSHMEM put may be read by a network adapter.
      notifyScope: o.backend === "sm" ? "gpu" : "sys",
    },
    producer,
    tables,
  );
  const kernels: Kernel[] = [made.kernel];
  const files: EmittedFile[] = [made.file];
  let hostOps: RankHostOps[];
  if (o.backend === "copy-engine") {
    hostOps = ranks.map((r) => {
      const streams = new Map<number, HostOp[]>();
      const waited = new Set<string>();
      for (const d of peerDeliveries.filter((x) => x.from === r.rank)) {
        const ops = streams.get(d.stream) ?? [];
        for (const w of d.waits) {
          // A host wait once per (stream, slot): later deliveries on the stream are ordered after it.
          if (waited.has(`${d.stream}:${w.slot}`)) continue;
          waited.add(`${d.stream}:${w.slot}`);
          ops.push({ kind: "wait", slot: tileDoneBase + w.slot, arrivals: w.arrivals });
        }
        // Whole rows of a row-major tensor: the chunk is one contiguous run on both sides.
        const at = where(d);
        const length = d.blocks * rowsElems;
        ops.push({
          kind: "copy",
          src: { buffer: tensor.name, rank: d.from, offset: at.src, length },
          dst: { buffer: GEMM_RS_BUFFERS.partials, rank: d.to, offset: at.dst, length },
          signal: { rank: d.to, slot: at.slot },
        });
        streams.set(d.stream, ops);
      }
      return {
        rank: r.rank,
        streams: [...streams.entries()].sort((a, b) => a[0] - b[0]).map(([s, ops]) => ({ name: commStreamName(s), ops })),
      };
    });
  } else {
    // One segment per m-block: the push programs then share a chunk between them.
    const rows = ranks.map((r) =>
      peerDeliveries
        .filter((d) => d.from === r.rank)
        .flatMap((d) => {
          if (d.waits.length !== 1)
            throw new EmitError(
              "bad-plan",
              `rank ${d.from}: m-block ${d.mBlock} waits on ${d.waits.length} tile-done slots; sm-push waits on one`,
            );
          const w = d.waits[0]!;
          return Array.from({ length: d.blocks }, (_, k) => {
            const at = where({ from: d.from, to: d.to, mBlock: d.mBlock + k });
            return [at.src, d.to, at.dst, rowsElems, tileDoneBase + w.slot, w.arrivals, arrivalAt(at.slot)];
          });
        }),
    );
    const { table, count } = segmentTable(PUSH_SEGMENTS, rows);
    tables.push(table);
    hostOps = [];
    if (nvshmem) {
      for (const r of table.values) checkNvshmemRows(r, slots);
      kernels.push(nvshmemPushKernel(o, tensor.name, GEMM_RS_BUFFERS.partials, count));
      files.push({ path: "nvshmem_push.py", text: nvshmemPushSource({ dtype: o.dtype }) });
    }
  }
  if (o.backend === "sm") {
    const comm = checkSmCommParams({ BLOCK: o.commBlock });
    const rows = tables.find((t) => t.name === PUSH_SEGMENTS)!.values;
    for (const r of rows) checkSegmentAlignment(r, SM_PUSH_FIELDS, ["src_offset", "dst_offset"], o.dtype);
    const count = rows[0]!.length / SM_PUSH_FIELDS.length;
    kernels.push(smPushKernel(o, tensor.name, count, comm));
    files.push({ path: "sm_push.py", text: smPushSource(comm, { dtype: o.dtype }) });
  }
  const reduce = checkRsReduceParams({
    WORLD: world,
    BLOCK_M: params.BLOCK_M,
    BLOCK_N: o.reduceBlockN ?? rsReduceBlockN(params.BLOCK_M),
    N,
    rows_per_rank: rowsPerRank,
  });
  const { expect } = made;
  return {
    o,
    world,
    tensor,
    params,
    rowsPerRank,
    blocksPerSlab,
    slots,
    buffers,
    tables,
    kernels,
    files,
    hostOps,
    reduce,
    ...(expect === undefined ? {} : { expect }),
  };
}
