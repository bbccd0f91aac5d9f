// GEMM + AllReduce, tile-wise (DistFuse §3: "trigger communication immediately"): the
// producer notifies a flag per output tile; `tile-push` sends each finished partial tile
// to the rank owning its rows; there `ar-tile-reduce` waits on the tile's flag (its own
// tile and every peer's push), sums, and stores the reduced tile into every rank's output,
// signalling the tile on every rank. All transfers are SM loads/stores: a tile's rows are
// strided, not the one contiguous run a copy engine moves.
import type { ChunkPlan } from "@ovl/chunk-plan";
import {
  AR_TILE_FIELDS,
  AR_TILE_REDUCE,
  arTileReduceSource,
  checkGemmParams,
  checkSegmentAlignment,
  checkTileCommParams,
  TILE_PUSH,
  TILE_PUSH_FIELDS,
  tilePushSource,
  tileStepRows,
} from "../../backends/triton/kernels/index.js";
import { MANIFEST_SCHEMA, type Buffer, type Table } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import type { EmitResult } from "../../core/result.js";
import { AR_PLANS } from "./movements.js";
import {
  checkDistinctBuffers,
  commGrid,
  kernelEntry,
  signalBuffer,
  SIGNAL_BUFFER,
  slotWaitStage,
  worldOf,
} from "../../backends/triton/common.js";
import { AR_STREAMS, GEMM_AR_BUFFERS, gemmArReference } from "./partitioned.js";
import type { ProducerFactory } from "../gemm-rs/template.js";
import { type EmitOptions, gemmLaunch, resolveOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import { refuseFp8Template } from "../../core/dtype.js";

/** The GEMM a tile-wise AllReduce reduces: the partial tensor, the problem, the body's tile. */
export interface TilewiseGemm {
  /** The plan tensor holding each rank's partial output (the producer's output). */
  readonly src: string;
  readonly problem: { readonly M: number; readonly N: number; readonly K: number };
  readonly tile: { readonly BM: number; readonly BN: number; readonly BK: number };
  readonly groupM: number;
}

/**
 * The rank owning m-block `mb` of `numPidM` over `world` ranks: contiguous runs of m-blocks,
 * as even as they go (the slab of rows `r · M/W ..` when m-blocks divide evenly).
 */
export function tileOwner(mb: number, numPidM: number, world: number): number {
  return Math.floor((mb * world) / numPidM);
}

/** First m-block rank `r` owns ({@link tileOwner}). */
export function firstOwned(r: number, numPidM: number, world: number): number {
  return Math.ceil((r * numPidM) / world);
}

/**
 * Emit the tile-wise GEMM+AllReduce of `plan` (all-reduce collectives of the partial output,
 * `allReduceTilewise`; their regions only say that every tile is reduced once its compute
 * is done: the flags are per tile of the body, `BLOCK_M × BLOCK_N`). Tile `t = m · numPidN + n`
 * of T; m-block `m` is owned by `tileOwner(m)`. Slots: `t` = tile t's flag (1 arrival on a
 * rank that does not own it: its producer; `W` on its owner: its producer and every peer's
 * push), `T + t` = tile t reduced, on every rank (1), `2T` = reduced tiles on this rank (T).
 * Rank q computes the m-blocks of ranks `q+1, q+2, …` first and its own last. Kernels: the
 * producer (compute stream), `tile-push` then `ar-tile-reduce` (comm stream, `commSms`
 * programs each); every rank's host stream `ar_done` waits on slot `2T`, so a launch ends
 * with its whole output in place. Buffers: `partials` `[W, R, N]` (R = most rows a rank
 * owns; peer p's pushes land in slab p), output `ar_out` `[M, N]`, both symmetric.
 * @throws {EmitError} `unsupported-op` for copy-engine transfers, `bad-param` for a tiling
 *   the kernels cannot take, `bad-plan` for a tensor that does not match.
 */
export function emitGemmArTilewise(plan: ChunkPlan, gemm: TilewiseGemm, options: EmitOptions, producer: ProducerFactory): EmitResult {
  if (options.backend === "nvshmem")
    throw new EmitError(
      "unsupported-op",
      `the nvshmem transfer backend realises GEMM+AllReduce as ${AR_PLANS.partitioned} (slab puts, then puts of the reduced slabs); a tile-wise AllReduce pushes strided tiles with SM stores: options.backend "sm"`,
    );
  if (options.backend === "copy-engine") {
    throw new EmitError(
      "unsupported-op",
      `a tile-wise AllReduce moves BLOCK_M × BLOCK_N tiles, whose rows are strided, and a copy engine copies contiguous runs: use options.backend "sm" (the default for this plan), or ${AR_PLANS.partitioned} with the copy engine`,
    );
  }
  const o = resolveOptions({ ...options, backend: "sm" });
  refuseFp8Template(o.dtype, "GEMM+AllReduce");
  const world = worldOf(plan);
  const tensor = plan.tensors.find((t) => t.name === gemm.src);
  const { M, N, K } = gemm.problem;
  if (tensor === undefined || tensor.shape.length !== 2 || tensor.shape[0] !== M || tensor.shape[1] !== N) {
    throw new EmitError("bad-plan", `the partial output ${gemm.src} must be a [${M}, ${N}] tensor of the plan (the GEMM's C)`);
  }
  if (tensor.dtype !== o.dtype) throw new EmitError("bad-plan", `tensor ${tensor.name} is ${tensor.dtype} but options.dtype is ${o.dtype}`);
  const params = checkGemmParams({
    M,
    N,
    K,
    BLOCK_M: gemm.tile.BM,
    BLOCK_N: gemm.tile.BN,
    BLOCK_K: options.blockK ?? gemm.tile.BK,
    GROUP_M: options.groupM ?? gemm.groupM,
  });
  const { BLOCK_M: BM, BLOCK_N: BN } = params;
  const numPidM = Math.ceil(M / BM);
  const numPidN = Math.ceil(N / BN);
  const T = numPidM * numPidN;
  const owned = (r: number) => firstOwned(r + 1, numPidM, world) - firstOwned(r, numPidM, world);
  const partRows = Math.max(1, ...Array.from({ length: world }, (_, r) => owned(r))) * BM;
  const rowsOf = (mb: number) => Math.min(BM, M - mb * BM);
  const colsOf = (n: number) => Math.min(BN, N - n * BN);
  const tileAt = (mb: number, n: number) => mb * BM * N + n * BN;
  // Peers' m-blocks first, rank q+1's first, the own ones last: their rows never cross NVLink.
  const order = Array.from({ length: world }, (_, q) =>
    Array.from({ length: world }, (_, d) => (q + d + 1) % world).flatMap((r) =>
      Array.from({ length: owned(r) }, (_, k) => firstOwned(r, numPidM, world) + k),
    ),
  );
  const flags = Array.from({ length: world }, () => Array.from({ length: T }, (_, t) => t));
  const pushes = order.map((byM, q) =>
    byM
      .filter((mb) => tileOwner(mb, numPidM, world) !== q)
      .flatMap((mb) =>
        Array.from({ length: numPidN }, (_, n) => {
          const owner = tileOwner(mb, numPidM, world);
          const dst = q * partRows * N + (mb - firstOwned(owner, numPidM, world)) * BM * N + n * BN;
          const t = mb * numPidN + n;
          return [tileAt(mb, n), owner, dst, rowsOf(mb), colsOf(n), t, 1, t];
        }),
      ),
  );
  const reduces = Array.from({ length: world }, (_, r) =>
    Array.from({ length: owned(r) }, (_, k) => firstOwned(r, numPidM, world) + k).flatMap((mb) =>
      Array.from({ length: numPidN }, (_, n) => {
        const t = mb * numPidN + n;
        const part = (mb - firstOwned(r, numPidM, world)) * BM * N + n * BN;
        return [tileAt(mb, n), part, tileAt(mb, n), rowsOf(mb), colsOf(n), t, world, T + t];
      }),
    ),
  );
  const comm = checkTileCommParams({ BLOCK_R: tileStepRows(o.commBlock, BN, BM), BLOCK_C: BN, WORLD: world });
  const table = (name: string, rows: number[][][], fields: readonly string[], offsets: readonly string[]) => {
    for (const r of rows) checkSegmentAlignment(r.flat(), fields, offsets, o.dtype);
    const count = Math.max(1, ...rows.map((r) => r.length));
    // Rows of no tile, no wait and no notify pad every rank's table to one length.
    const pad = [0, 0, 0, 0, 0, -1, 0, -1];
    return {
      count,
      table: {
        name,
        dtype: "int64" as const,
        values: rows.map((r) => [...r, ...Array.from({ length: count - r.length }, () => pad)].flat()),
      },
    };
  };
  const push = table("tile_push_rows", pushes, TILE_PUSH_FIELDS, ["src_offset", "dst_offset"]);
  const reduce = table("ar_tile_rows", reduces, AR_TILE_FIELDS, ["own_offset", "part_offset", "out_offset"]);
  const slots = 2 * T + 1;
  const made = producer({
    order,
    notify: order.map(() => new Array<number>(numPidM).fill(-1)),
    notifyTile: flags,
    params,
    launch: gemmLaunch(o, params),
    reserve: { reserve: o.commSms },
    numTiles: T,
    numPidN,
    partial: gemm.src,
    a: GEMM_AR_BUFFERS.a,
    b: GEMM_AR_BUFFERS.b,
    options: o,
    operator: "gemm-ar",
  });
  const buffers: Buffer[] = [
    { name: GEMM_AR_BUFFERS.a, shape: [M, K], dtype: o.dtype, symmetric: false, init: "random" },
    { name: GEMM_AR_BUFFERS.b, shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: gemm.src, shape: [M, N], dtype: o.dtype, symmetric: false, init: "poison" },
    { name: GEMM_AR_BUFFERS.partials, shape: [world, partRows, N], dtype: o.dtype, symmetric: true, init: "poison" },
    { name: GEMM_AR_BUFFERS.out, shape: [M, N], dtype: o.dtype, symmetric: true, init: "poison" },
    signalBuffer(slots, false),
  ];
  checkDistinctBuffers(buffers);
  const tables: Table[] = [...made.tables, push.table, reduce.table];
  const common = {
    sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
    sig_ptrs: { kind: "peer-pointers", buffer: SIGNAL_BUFFER },
    row_stride: { kind: "int", value: N },
    err_ptr: { kind: "error-buffer" },
    rank: { kind: "rank" },
    epoch_ptr: { kind: "epoch-word" },
    timeout_ns: { kind: "timeout-ns" },
  } as const;
  const launch = { stream: "comm" as const, numWarps: o.commWarps, numStages: 1 };
  const kernels = [
    made.kernel,
    kernelEntry(TILE_PUSH, {
      name: "tile_push",
      ...launch,
      grid: commGrid(o.commSms, push.count),
      args: {
        ...common,
        src_ptr: { kind: "buffer", name: gemm.src },
        dst_ptrs: { kind: "peer-pointers", buffer: GEMM_AR_BUFFERS.partials },
        seg_ptr: { kind: "table", name: push.table.name },
        num_segments: { kind: "int", value: push.count },
      },
      constexprs: { BLOCK_R: comm.BLOCK_R, BLOCK_C: comm.BLOCK_C },
      params: { BLOCK_R: comm.BLOCK_R, BLOCK_C: comm.BLOCK_C, segments: push.count },
    }),
    kernelEntry(AR_TILE_REDUCE, {
      name: "ar_tile_reduce",
      ...launch,
      grid: commGrid(o.commSms, reduce.count),
      args: {
        ...common,
        own_ptr: { kind: "buffer", name: gemm.src },
        part_ptr: { kind: "buffer", name: GEMM_AR_BUFFERS.partials },
        out_ptrs: { kind: "peer-pointers", buffer: GEMM_AR_BUFFERS.out },
        seg_ptr: { kind: "table", name: reduce.table.name },
        num_segments: { kind: "int", value: reduce.count },
        slab_elems: { kind: "int", value: partRows * N },
        done_at: { kind: "int", value: 2 * T },
      },
      constexprs: { WORLD: world, BLOCK_R: comm.BLOCK_R, BLOCK_C: comm.BLOCK_C },
      params: { WORLD: world, BLOCK_R: comm.BLOCK_R, BLOCK_C: comm.BLOCK_C, segments: reduce.count },
    }),
  ];
  const done = slotWaitStage(
    AR_STREAMS.done,
    Array.from({ length: world }, () => [[2 * T, T]]),
    o.dtype,
  );
  tables.push(done.table);
  kernels.push(done.kernel);
  const files = [
    made.file,
    { path: "tile_push.py", text: tilePushSource(comm, { dtype: o.dtype }) },
    { path: "ar_tile_reduce.py", text: arTileReduceSource(comm, { dtype: o.dtype }) },
    done.file,
  ];
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: options.name ?? "gemm_ar_tilewise",
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots, bits: 32 },
    tables,
    kernels,
    hostOps: [],
    reference: gemmArReference(M, N, K, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  return { files, manifest };
}
