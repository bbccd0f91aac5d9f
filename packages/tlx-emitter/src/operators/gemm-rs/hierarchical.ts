// Hierarchical (two-level) GEMM + ReduceScatter over NVSHMEM. An NVSHMEM put cannot add, and the
// plan's stage-1 pulls accumulate node peers' partials, so each sum runs on SMs: the node peers
// put their partial rows of a rank's rail into its staging buffer (stage 1, inside the node), a
// `slab-sum` adds them to the rank's own rows per m-block and signals each node sum, the rank puts
// the node sums of the other nodes' shards to the same GPU of those nodes (stage 2, the network:
// `1/G` of a flat ReduceScatter's bytes), and a second `slab-sum` adds the nodes' sums of its own
// shard into the output. Every wait is ovl's bounded, named `wait_slot`.
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import {
  checkSlabSumParams,
  nvshmemPushSource,
  nvshmemSlot,
  nvshmemSlotCount,
  rsReduceBlockN,
  SLAB_SUM,
  type SlabSumParams,
  slabSumGrid,
  slabSumSource,
} from "../../backends/triton/kernels/index.js";
import { checkDistinctBuffers, kernelEntry, SIGNAL_BUFFER, signalBuffer } from "../../backends/triton/common.js";
import { nvshmemPushKernel } from "../../backends/triton/nvshmem.js";
import { type Buffer, type Kernel, type KernelArg, MANIFEST_SCHEMA, type Table } from "../../core/manifest/schema.js";
import { validated } from "../../core/manifest/validate.js";
import { type EmitOptions, gemmLaunch, resolveOptions } from "../../core/options.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { checkHierarchicalRs, HIERARCHICAL_RS } from "../../schedule/rs-hierarchical.js";
import { GEMM_RS_BUFFERS } from "./buffers.js";
import { gemmRsReference, type NvshmemRow as Row, nvshmemPushTable as pushTable, producerTables, rsProblem } from "./problem.js";
import { type ProducerFactory, rsProducer } from "./producer.js";

/** Buffers of the hierarchical GEMM+RS besides those of GEMM+RS. */
export const HIERARCHICAL_RS_BUFFERS = { node: "node_partials", sums: "node_sums", net: "net_partials" } as const;

function slabSumArgs(part: string, own: string, out: string, slotTable: string, blockTable: string, p: SlabSumParams, doneBase: number) {
  const args: Record<string, KernelArg> = {
    part_ptr: { kind: "buffer", name: part },
    own_ptr: { kind: "buffer", name: own },
    out_ptr: { kind: "buffer", name: out },
    sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
    slot_ptr: { kind: "table", name: slotTable },
    block_ptr: { kind: "table", name: blockTable },
    err_ptr: { kind: "error-buffer" },
    N: { kind: "int", value: p.N },
    rank: { kind: "rank" },
    epoch_ptr: { kind: "epoch-word" },
    timeout_ns: { kind: "timeout-ns" },
    blocks: { kind: "int", value: p.blocks },
    done_base: { kind: "int", value: doneBase },
  };
  return args;
}

/**
 * Emit the hierarchical GEMM+ReduceScatter of `plan` (`reduceScatterHierarchical({ afterCompute:
 * true })` over `[nodes, gpusPerNode]`, both 2 or more; checked by `checkHierarchicalRs`) with its
 * producer `schedule`, on the `nvshmem` backend. Rank r = (n, g), slab `B` m-blocks, rail `R = nodes·B`
 * m-blocks listed other nodes' shards first (`railBlock`). Int32 signal slots (each plan-free):
 * `2(g'·R + i)` = node peer g''s partial of rail block i arrived; `2(G·R + m·B + j)` = node m's sum
 * of m-block j of r's slab arrived; `D + i` (D after those words) = rail block i summed (one add per
 * tile); then the schedule's tile-done slots. Kernels: the producer (compute; other rails' m-blocks
 * first, its own rail last), `nvshmem_push` (comm; stage 1: per peer and m-block, after its tile-done
 * slot, a put into the peer's `node_partials[g]`), `node_sum` (`slab-sum` over G into `node_sums`,
 * notifying D + i), `nvshmem_push_net` (comm, after the first; stage 2: per other node and m-block,
 * after D + i, a put into `net_partials[n]` of rank (m, g)), `rs_reduce` (`slab-sum` over the nodes
 * into `rs_out`). The reference is GEMM+RS's. `producer` (a transformed local body) replaces the
 * template producer, as in `emitGemmRs`.
 * @throws {EmitError} for another backend, a plan that is not the hierarchical ReduceScatter, slabs
 *   that are not whole m-blocks, or bad options.
 */
export function emitGemmRsHierarchical(
  plan: ChunkPlan,
  schedule: TileSchedule,
  options: EmitOptions = {},
  producer?: ProducerFactory,
): EmitResult {
  const o = resolveOptions(options);
  if (o.backend !== "nvshmem")
    throw new EmitError(
      "unsupported-op",
      `plan "${plan.name}" sums partials inside the node before the network (a hierarchical ReduceScatter), which GEMM+RS builds on the nvshmem backend (options.backend "nvshmem"); over "${o.backend}" use reduceScatterDirect({ afterCompute: true })`,
    );
  const { world, tensor, M, N, K, params, rowsPerRank } = rsProblem(plan, schedule, options, o, HIERARCHICAL_RS);
  const L = checkHierarchicalRs(plan, schedule, tensor.name, rowsPerRank / params.BLOCK_M);
  const { numTiles } = schedule.grid;
  const { ranks, tables: tiles } = producerTables(schedule);
  const { gpus: G, nodes, slabBlocks: B, railBlocks: R } = L;
  const nodeArrival = (from: number, i: number) => nvshmemSlot((from % G) * R + i);
  const netArrival = (fromNode: number, j: number) => nvshmemSlot(G * R + fromNode * B + j);
  const doneBase = nvshmemSlotCount(G * R + nodes * B);
  const tileDoneBase = doneBase + R;
  const slots = tileDoneBase + Math.max(0, ...ranks.flatMap((r) => r.slots.map((s) => s.slot + 1)));
  const blockElems = params.BLOCK_M * N;
  const BLOCK_N = o.reduceBlockN ?? rsReduceBlockN(params.BLOCK_M);
  const nodeSum = checkSlabSumParams({ CONTRIB: G, BLOCK_M: params.BLOCK_M, BLOCK_N, N, blocks: R });
  const netSum = checkSlabSumParams({ CONTRIB: nodes, BLOCK_M: params.BLOCK_M, BLOCK_N, N, blocks: B });
  const tilesPerBlock = Math.ceil(N / BLOCK_N);
  const tileDone = (rank: number, block: number): { slot: number; arrivals: number } => {
    const t = tiles[rank]!;
    const slot = t.slot[block] ?? -1;
    if (slot < 0)
      throw new EmitError(
        "bad-schedule",
        `rank ${rank}: m-block ${block} notifies no tile-done slot; its partial rows are sent after compute`,
      );
    return { slot: tileDoneBase + slot, arrivals: t.arrivals[block] ?? 0 };
  };
  const peersOf = (r: number) => Array.from({ length: G - 1 }, (_, k) => Math.floor(r / G) * G + (((r % G) + k + 1) % G));

  // Stage 1: rank p puts its partial of every rail block of each node peer r into r's node_partials[p's GPU].
  const stage1: Row[][] = ranks.map(({ rank: p }) =>
    peersOf(p).flatMap((r) =>
      Array.from({ length: R }, (_, i): Row => {
        const b = L.railBlock(r, i);
        const w = tileDone(p, b);
        return [b * blockElems, r, ((p % G) * R + i) * blockElems, blockElems, w.slot, w.arrivals, nodeArrival(p, i)];
      }),
    ),
  );
  // Stage 2: rank r puts its node's sum of each other node m's shard to rank (m, g)'s net_partials[r's node].
  const stage2: Row[][] = ranks.map(({ rank: r }) =>
    Array.from({ length: nodes - 1 }, (_, t) => ((Math.floor(r / G) + t + 1) % nodes) * G + (r % G)).flatMap((q) =>
      Array.from({ length: B }, (_, j): Row => {
        const i = L.railPosition(r, Math.floor(q / G)) + j;
        return [
          i * blockElems,
          q,
          (Math.floor(r / G) * B + j) * blockElems,
          blockElems,
          doneBase + i,
          tilesPerBlock,
          netArrival(Math.floor(r / G), j),
        ];
      }),
    ),
  );
  // The producer computes what stage 1 sends first, its own rail (read in place) last, in rail order.
  const order = ranks.map(({ rank: r }) => {
    const own = Array.from({ length: R }, (_, i) => L.railBlock(r, i));
    const sent = stage1[r]!.map((row) => row[0] / blockElems);
    return [...sent, ...own];
  });
  const push1 = pushTable("push_segments", stage1, slots);
  const push2 = pushTable("net_segments", stage2, slots);

  const { a, b, out } = GEMM_RS_BUFFERS;
  const { node, sums, net } = HIERARCHICAL_RS_BUFFERS;
  const buffers: Buffer[] = [
    { name: a, shape: [M, K], dtype: o.dtype, symmetric: false, init: "random" },
    { name: b, shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" },
    // Put sources are symmetric: a network transport reaches only memory registered with it.
    { name: tensor.name, shape: [M, N], dtype: o.dtype, symmetric: true, init: "poison" },
    { name: node, shape: [G, R * params.BLOCK_M, N], dtype: o.dtype, symmetric: true, init: "poison" },
    { name: sums, shape: [R * params.BLOCK_M, N], dtype: o.dtype, symmetric: true, init: "poison" },
    { name: net, shape: [nodes, rowsPerRank, N], dtype: o.dtype, symmetric: true, init: "poison" },
    { name: out, shape: [rowsPerRank, N], dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(slots, false),
  ];
  checkDistinctBuffers(buffers);
  const tables: Table[] = [
    push1.table,
    push2.table,
    // Per contributor k (a GPU of the node, then a node) and block: its arrival slot, -1 for the rank's own.
    {
      name: "node_arrival_slot",
      dtype: "int32",
      values: ranks.map(({ rank: r }) =>
        Array.from({ length: G }, (_, k) => Array.from({ length: R }, (_, i) => (k === r % G ? -1 : nvshmemSlot(k * R + i)))).flat(),
      ),
    },
    { name: "node_block", dtype: "int32", values: ranks.map(({ rank: r }) => Array.from({ length: R }, (_, i) => L.railBlock(r, i))) },
    {
      name: "net_arrival_slot",
      dtype: "int32",
      values: ranks.map(({ rank: r }) =>
        Array.from({ length: nodes }, (_, m) =>
          Array.from({ length: B }, (_, j) => (m === Math.floor(r / G) ? -1 : netArrival(m, j))),
        ).flat(),
      ),
    },
    {
      name: "net_block",
      dtype: "int32",
      values: ranks.map(({ rank: r }) => Array.from({ length: B }, (_, j) => L.railPosition(r, Math.floor(r / G)) + j)),
    },
  ];
  const reserve = { reserve: o.commSms };
  const notify = tiles.map((t) => t.slot.map((s) => (s < 0 ? -1 : tileDoneBase + s)));
  const gemm = gemmLaunch(o, params);
  const made = rsProducer(
    {
      order,
      notify,
      params,
      launch: gemm,
      reserve,
      numTiles,
      numPidN: schedule.grid.numPidN,
      partial: tensor.name,
      a,
      b,
      options: o,
      operator: "gemm-rs",
      // Read by the network adapter of an NVSHMEM put: released at system scope.
      notifyScope: "sys",
    },
    producer,
    tables,
  );
  const kernels: Kernel[] = [
    made.kernel,
    nvshmemPushKernel(o, tensor.name, node, push1.count),
    kernelEntry(SLAB_SUM, {
      name: "node_sum",
      stream: "compute",
      grid: slabSumGrid(nodeSum, o.commSms),
      numWarps: 4,
      numStages: 1,
      args: slabSumArgs(node, tensor.name, sums, "node_arrival_slot", "node_block", nodeSum, doneBase),
      constexprs: { CONTRIB: G, BLOCK_M: params.BLOCK_M, BLOCK_N },
      params: { ...nodeSum },
    }),
    nvshmemPushKernel(o, sums, net, push2.count, { name: "nvshmem_push_net", table: "net_segments" }),
    kernelEntry(SLAB_SUM, {
      name: "rs_reduce",
      stream: "compute",
      grid: slabSumGrid(netSum, o.commSms),
      numWarps: 4,
      numStages: 1,
      args: slabSumArgs(net, sums, out, "net_arrival_slot", "net_block", netSum, -1),
      constexprs: { CONTRIB: nodes, BLOCK_M: params.BLOCK_M, BLOCK_N },
      params: { ...netSum },
    }),
  ];
  const push = nvshmemPushSource({ dtype: o.dtype });
  const files = [
    made.file,
    { path: "nvshmem_push.py", text: push },
    { path: "nvshmem_push_net.py", text: push },
    { path: "node_sum.py", text: slabSumSource(nodeSum, { dtype: o.dtype }) },
    { path: "rs_reduce.py", text: slabSumSource(netSum, { dtype: o.dtype }) },
  ];
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: options.name ?? "gemm_rs_hierarchical_nvshmem",
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots, bits: 32 },
    tables,
    kernels,
    hostOps: [],
    reference: gemmRsReference(M, N, K, rowsPerRank, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  return { files, manifest, ...(made.expect === undefined ? {} : { expect: made.expect }) };
}
