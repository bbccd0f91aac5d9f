// Compiling AllGather + MoE for any row count (`Operator.rows`): the MoE body transformed with the segment and slot
// maps of `rows.ts` printed over the inserted `ovl_rows` parameter (its `M`, `MAX_BLOCKS`, padding sentinel and last
// row too), the routing kernels on a fixed grid with their sizes as run-time arguments, the swizzle push AllGather of
// the tokens as host ops over M, the whole plan checked at every M served, and the manifest written at the operator's
// M with its `rows` section.
import { operatorGemmParams } from "../../core/gemm-params.js";
import { mul, staticMap, sub, variable, type Expr } from "@ovl/mapping";
import { checkDistinctBuffers, rowShards, signalBuffer, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { planTensor } from "../../backends/triton/consumer.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { bindGemm } from "../../core/bind.js";
import { MANIFEST_SCHEMA, type Buffer, type Manifest, type Rows } from "../../core/manifest/schema.js";
import type { Operator, RowsRequest } from "../../core/operator.js";
import { gemmLaunch, resolveOptions } from "../../core/options.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { parseLocalKernel, transformLocalKernel, type GatherRows } from "../../local/index.js";
import { consumerInsertedArgs } from "../../schedule/maps.js";
import { agRowsHostOps, ROWS_VARIABLE } from "../ag-gemm/rows.js";
import { ROWS_PLAN } from "../ag-gemm/rows-compile.js";
import { checkRowsAt, rowsManifest, rowsSection } from "../rows-mode.js";
import { checkAgMoeRows, moeMinRowsPerRank, moeRowsMaps, MOE_ROWS_PROGRAMS, type MoeRowsShape } from "./rows.js";
import {
  checkMoeRouting,
  LOCAL_MOE_KIND,
  moeAlignSizes,
  moeBindings,
  MOE_BUFFERS,
  moeBodyParams,
  routingBuffers,
  routingKernels,
  routingModule,
} from "./triton.js";

/** `Operator.rows` resolved for an AllGather + MoE of `world` ranks: the range (default: non-empty chunks up to 32768). */
export function moeRowsShape(req: RowsRequest, world: number, sizes: Omit<MoeRowsShape, "world" | "split" | "min" | "max">): MoeRowsShape {
  const split = req.split ?? 2;
  if (!Number.isSafeInteger(split) || split < 1) throw new EmitError("bad-param", `rows.split must be a positive integer, got ${split}`);
  const min = req.min ?? world * moeMinRowsPerRank(split);
  const max = req.max ?? Math.max(min, 32768 - (32768 % world));
  return { world, split, min, max, ...sizes };
}

/**
 * Compile `op` (an `ag-moe` whose plan is the swizzle push AllGather of the tokens, at its problem's M) into one operator
 * serving every token count of `req`: M is all ranks' tokens (each rank holds M / world), a multiple of the world. The
 * manifest describes it at `op.problem.M`; its `rows` section makes it concrete at another M (`instantiateRows`).
 * @throws {EmitError} `bad-param` for a routing, body, plan or range rows mode cannot serve; `bad-schedule` when the plan
 *   fails its check at some M (a bug, named with the M).
 */
export async function compileAgMoeRows(op: Operator, req: RowsRequest): Promise<EmitResult> {
  const moe = checkMoeRouting(op.moe);
  const o = resolveOptions(op.options ?? {});
  if (op.plan.name !== ROWS_PLAN) {
    throw new EmitError("bad-param", `rows mode realises the ${ROWS_PLAN} plan at every row count; plan "${op.plan.name}" is another`);
  }
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "consumer" || kernel.rows === undefined) {
    throw new EmitError("bad-param", `${op.body.path}: an ag-moe body is a consumer that reads its rows through the routing's index table`);
  }
  const names = kernel.params.map((p) => p.name);
  if (!names.includes("M"))
    throw new EmitError("bad-param", `${op.body.path}: rows mode binds the token count to the body's M, which ${kernel.entry} lacks`);
  const { M: at, N, K } = op.problem;
  const world = op.plan.mesh.shape.reduce((a, b) => a * b, 1);
  const params = operatorGemmParams(op);
  const shape = moeRowsShape(req, world, { blockM: op.tile.BM, K, N, blockN: op.tile.BN, routing: moe });
  const maps = moeRowsMaps(shape);
  checkRowsAt(at, shape, world);
  const tensor = planTensor(op, "AllGather+MoE");
  const planned = op.plan.tensors.find((t) => t.name === tensor);
  if (planned?.dtype !== undefined && planned.dtype !== o.dtype)
    throw new EmitError("bad-plan", `tensor ${tensor} is ${planned.dtype} but options.dtype is ${o.dtype}`);
  const hostOps = agRowsHostOps(shape, maps, tensor);
  const numPidN = Math.ceil(N / op.tile.BN);
  const gridOverM = kernel.persistent ? undefined : mul(maps.maxBlocks, numPidN);
  const sortedIds = mul(maps.maxBlocks, op.tile.BM);
  checkAgMoeRows(shape, maps, {
    hostOps,
    sortedIds,
    expertOfBlock: maps.maxBlocks,
    ...(gridOverM === undefined ? {} : { grid: gridOverM }),
  });

  // The sizes at the operator's M, on the fixed grid of routing programs; the most blocks at the largest M.
  const sizes = { ...moeAlignSizes(at, moe, op.tile.BM), programs: MOE_ROWS_PROGRAMS };
  const most = moeAlignSizes(shape.max, moe, op.tile.BM).maxBlocks;
  const gather: GatherRows = {
    blockRows: op.tile.BM,
    divisor: moe.topk,
    limit: sizes.slots,
    rowCount: at,
    segment: staticMap(maps.segment),
    segmentCount: maps.segments,
    runtime: { limit: maps.slots, last: sub(maps.M, 1) },
  };
  const order = staticMap(variable("ovl_m", { min: 0, max: most - 1 }));
  const slots = [staticMap(maps.slot)];
  const t = transformLocalKernel(kernel, { role: "consumer", order, slots, tables: [], scalars: [ROWS_VARIABLE], gather });
  const buffers: Buffer[] = [
    { name: tensor, shape: [at, K], dtype: o.dtype, symmetric: true, init: "random" },
    { name: MOE_BUFFERS.w, shape: [moe.experts, K, N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: MOE_BUFFERS.c, shape: [sizes.slots, N], dtype: o.dtype, symmetric: false, init: "poison" },
    ...routingBuffers(sizes, moe),
    signalBuffer(maps.segments, true),
  ];
  checkDistinctBuffers(buffers);
  const byName = Object.fromEntries(Object.entries(moeBindings(sizes)).filter(([p]) => names.includes(p)));
  const own = bindGemm(
    names,
    { buffers: { a: tensor, b: MOE_BUFFERS.w, c: MOE_BUFFERS.c }, params: { a: kernel.operand }, ...params },
    { ...byName, M: { kind: "arg", arg: { kind: "rows" } }, ...op.bind },
  );
  const rowsBinding = own.get(kernel.rows);
  if (rowsBinding?.kind !== "arg" || rowsBinding.arg.kind !== "buffer" || rowsBinding.arg.name !== MOE_BUFFERS.sortedIds) {
    throw new EmitError("bad-param", `${op.body.path}: rows=${kernel.rows} must read the routing's ${MOE_BUFFERS.sortedIds}`);
  }
  const body = localKernelEntry(t, {
    name: op.name,
    kind: LOCAL_MOE_KIND,
    stream: "compute",
    grid: kernel.persistent ? [{ kind: "num-sms", cap: most * numPidN }] : [sizes.maxBlocks * numPidN],
    ...gemmLaunch(o, params, "registers"),
    own,
    inserted: { ...consumerInsertedArgs([]), [ROWS_VARIABLE]: { kind: "rows" } },
    params: { ...params, ...moeBodyParams(op.body.path, kernel.entry, slots.length, tensor, moe) },
    tileProgram: {
      role: "consumer",
      order,
      slots,
      numPidM: sizes.maxBlocks,
      numPidN,
      gather: {
        blockRows: gather.blockRows,
        divisor: gather.divisor,
        limit: gather.limit,
        rowCount: gather.rowCount,
        segment: gather.segment,
        rows: MOE_BUFFERS.sortedIds,
      },
    },
  });
  const routingSource = `${op.name}_routing.py`;
  const routing = routingKernels(sizes, routingSource);
  const overM: Rows["kernels"] = {
    [routing[0]!.name]: { args: { NUMEL: maps.slots, PER: maps.perSlots }, params: { tokens: maps.M } },
    [routing[1]!.name]: {
      args: { NUMEL: maps.slots, PER: maps.perSlots, MAX_BLOCKS: maps.maxBlocks, PER_B: maps.perBlocks },
      params: { tokens: maps.M },
    },
    [body.name]: {
      ...(names.includes("MAX_BLOCKS") ? { args: { MAX_BLOCKS: maps.maxBlocks } } : {}),
      ...(gridOverM === undefined ? {} : { grid: [gridOverM] as Expr[] }),
      gather: { limit: maps.slots, rowCount: maps.M },
    },
  };
  const symbolic: Manifest = {
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: maps.segments, bits: 32 },
    tables: [],
    kernels: [...routing, body],
    hostOps: [],
    reference: {
      operator: "ag-moe",
      M: at,
      N,
      K,
      inputs: { A: tensor, B: MOE_BUFFERS.w, topk: MOE_BUFFERS.topkIds },
      output: MOE_BUFFERS.c,
      ...rowShards(at, world),
      tolerance: o.tolerance,
    },
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
    rows: rowsSection(req, shape, world, at, {
      buffers: {
        [tensor]: maps.M,
        [MOE_BUFFERS.c]: maps.slots,
        [MOE_BUFFERS.topkIds]: maps.M,
        [MOE_BUFFERS.sortedIds]: sortedIds,
        [MOE_BUFFERS.expertOfBlock]: maps.maxBlocks,
      },
      hostOps,
      numPidM: maps.maxBlocks,
      kernels: overM,
    }),
  };
  return {
    files: [
      { path: routingSource, text: routingModule(true) },
      { path: body.source, text: t.source },
    ],
    manifest: rowsManifest(symbolic),
  };
}
