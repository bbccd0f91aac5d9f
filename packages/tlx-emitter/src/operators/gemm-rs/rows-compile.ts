// Compiling GEMM+ReduceScatter for any row count (`Operator.rows`): the producer body transformed with the
// tile order and notify slots of `rows.ts` printed over the inserted `ovl_rows` parameter (the body's own `M`
// bound to the call's row count), SM pushes whose segment table is instantiated per M, the rows-generic
// reduction (`rs-reduce-rows`), the whole plan checked at every M served, and the manifest written at the
// operator's M with its `rows` section.
import { staticMap } from "@ovl/mapping";
import { checkDistinctBuffers, commGrid, kernelEntry, SIGNAL_BUFFER, signalBuffer } from "../../backends/triton/common.js";
import {
  checkGemmParams,
  checkSmCommParams,
  RS_REDUCE_ROWS,
  rsReduceBlockN,
  rsReduceRowsSource,
  SM_PUSH,
  smPushSource,
} from "../../backends/triton/kernels/index.js";
import { alignmentUnit } from "../../backends/triton/kernels/sm-comm.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { bindGemm } from "../../core/bind.js";
import { instantiateRows } from "../../core/manifest/rows.js";
import { MANIFEST_SCHEMA, type Buffer, type Manifest, type Table } from "../../core/manifest/schema.js";
import { validated } from "../../core/manifest/validate.js";
import { DEFAULT_GROUP_M, type Operator, type RowsRequest } from "../../core/operator.js";
import { gemmLaunch, resolveOptions } from "../../core/options.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { parseLocalKernel, transformLocalKernel } from "../../local/index.js";
import { RANK_VAR } from "../../schedule/maps.js";
import { ROWS_VARIABLE } from "../ag-gemm/rows.js";
import { GEMM_RS_BUFFERS } from "./template.js";
import { LOCAL_PRODUCER_KIND, partialTensor } from "./triton.js";
import { checkGemmRsRows, rsRowsMaps, rsRowsSegments, rsRowsShape, rsRowsSlots } from "./rows.js";

/** The plan template a rows-generic GEMM+ReduceScatter realises at every M. */
export const RS_ROWS_PLAN = "reduce-scatter-direct";

/** The segment table of the SM pushes (`sm-push`'s `push_segments`). */
const SEGMENTS = "push_segments";

/**
 * Compile `op` (a `gemm-rs` whose plan is the direct ReduceScatter after compute, at its problem's M) into one
 * operator serving every row count of `req`. Its partial rows move with SM pushes (`options.backend` "sm" or
 * unset). The emitted manifest describes it at `op.problem.M`; its `rows` section says how to make it concrete
 * at another M (`instantiateRows`).
 * @throws {EmitError} `bad-param` for a body, plan, backend or range rows mode cannot serve; `bad-schedule`
 *   when the plan fails its check at some M (a bug, named with the M).
 */
export async function compileGemmRsRows(op: Operator, req: RowsRequest): Promise<EmitResult> {
  if (op.options?.backend !== undefined && op.options.backend !== "sm") {
    throw new EmitError(
      "bad-param",
      `rows mode delivers GEMM+ReduceScatter's partial rows with SM pushes; backend "${op.options.backend}" is another`,
    );
  }
  const o = resolveOptions({ ...op.options, backend: "sm" });
  const { M: at, N, K } = op.problem;
  const world = op.plan.mesh.shape.reduce((a, b) => a * b, 1);
  if (op.plan.name !== RS_ROWS_PLAN) {
    throw new EmitError("bad-param", `rows mode realises the ${RS_ROWS_PLAN} plan at every row count; plan "${op.plan.name}" is another`);
  }
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "producer" || kernel.rows !== undefined) {
    throw new EmitError("bad-param", `${op.body.path}: rows mode needs a GEMM producer body (# ovl: producer scatter=<param>)`);
  }
  if (kernel.shape.tileLoop === undefined) {
    throw new EmitError("bad-param", `${op.body.path}: rows mode needs a persistent body (# ovl: tile-loop): its grid cannot depend on M`);
  }
  const names = kernel.params.map((p) => p.name);
  if (!names.includes("M")) {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: rows mode binds the call's row count to the body's parameter M, which ${kernel.entry} lacks`,
    );
  }
  const unit = alignmentUnit(o.dtype);
  if (N % unit) {
    throw new EmitError(
      "bad-param",
      `rows mode pushes whole rows 16-byte aligned at every M: N (${N}) must be a multiple of ${unit} ${o.dtype} elements`,
    );
  }
  const params = checkGemmParams({
    M: at,
    N,
    K,
    BLOCK_M: op.tile.BM,
    BLOCK_N: op.tile.BN,
    BLOCK_K: op.tile.BK,
    GROUP_M: op.groupM ?? DEFAULT_GROUP_M,
  });
  const shape = rsRowsShape(req, world, params.BLOCK_M, params.BLOCK_N, N);
  const maps = rsRowsMaps(shape);
  if (at < shape.min || at > shape.max || at % world) {
    throw new EmitError(
      "bad-param",
      `the operator's M (${at}) must be one of the rows it serves (${shape.min}..${shape.max}, multiples of ${world})`,
    );
  }
  const segments = rsRowsSegments(shape, maps);
  checkGemmRsRows(shape, maps, segments, unit);

  const partial = partialTensor(op);
  const slots = rsRowsSlots(shape);
  const order = staticMap(maps.order);
  const notify = maps.notify.map((e) => staticMap(e));
  const t = transformLocalKernel(kernel, {
    role: "producer",
    order,
    slots: notify,
    // Only this rank's sm-push kernel waits on the tile-done slots, and it releases what it moves itself.
    notifyScope: "gpu",
    notifyAt: "tile",
    numPidN: shape.numPidN,
    tables: [],
    scalars: [ROWS_VARIABLE],
  });
  const own = bindGemm(
    names,
    { buffers: { a: GEMM_RS_BUFFERS.a, b: GEMM_RS_BUFFERS.b, c: partial }, params: { c: kernel.operand }, ...params },
    { M: { kind: "arg", arg: { kind: "rows" } }, ...op.bind },
  );
  const producer = localKernelEntry(t, {
    name: `${op.name}_producer`,
    kind: LOCAL_PRODUCER_KIND,
    stream: "compute",
    // The producer leaves the push kernel's SMs to it; a program with no tile at this M ends at once.
    grid: [{ kind: "num-sms", reserve: o.commSms }],
    ...gemmLaunch(o, params),
    own,
    inserted: { [ROWS_VARIABLE]: { kind: "rows" }, ovl_sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER }, [RANK_VAR]: { kind: "rank" } },
    params: {
      ...params,
      body: op.body.path,
      entry: kernel.entry,
      operator: "gemm-rs",
      a: GEMM_RS_BUFFERS.a,
      b: GEMM_RS_BUFFERS.b,
      c: partial,
    },
    tileProgram: {
      role: "producer",
      order,
      slots: notify,
      numPidM: Math.ceil(at / params.BLOCK_M),
      numPidN: shape.numPidN,
    },
  });
  const count = (world - 1) * shape.split;
  const comm = checkSmCommParams({ BLOCK: o.commBlock });
  const push = kernelEntry(SM_PUSH, {
    name: "sm_push",
    stream: "comm",
    grid: commGrid(o.commSms, count),
    numWarps: o.commWarps,
    numStages: 1,
    args: {
      src_ptr: { kind: "buffer", name: partial },
      dst_ptrs: { kind: "peer-pointers", buffer: GEMM_RS_BUFFERS.partials },
      sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      sig_ptrs: { kind: "peer-pointers", buffer: SIGNAL_BUFFER },
      seg_ptr: { kind: "table", name: SEGMENTS },
      num_segments: { kind: "int", value: count },
      err_ptr: { kind: "error-buffer" },
      rank: { kind: "rank" },
      epoch_ptr: { kind: "epoch-word" },
      timeout_ns: { kind: "timeout-ns" },
    },
    constexprs: { BLOCK: comm.BLOCK },
    params: { BLOCK: comm.BLOCK, segments: count },
  });
  const reduceBlockN = o.reduceBlockN ?? rsReduceBlockN(params.BLOCK_M);
  const reduce = kernelEntry(RS_REDUCE_ROWS, {
    name: "rs_reduce_rows",
    stream: "compute",
    grid: o.reducePrograms === undefined ? [{ kind: "num-sms" }] : [o.reducePrograms],
    numWarps: 4,
    numStages: 1,
    args: {
      part_ptr: { kind: "buffer", name: GEMM_RS_BUFFERS.partials },
      own_ptr: { kind: "buffer", name: partial },
      out_ptr: { kind: "buffer", name: GEMM_RS_BUFFERS.out },
      sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      err_ptr: { kind: "error-buffer" },
      N: { kind: "int", value: N },
      rank: { kind: "rank" },
      epoch_ptr: { kind: "epoch-word" },
      timeout_ns: { kind: "timeout-ns" },
      ovl_rows: { kind: "rows" },
    },
    constexprs: { WORLD: world, BLOCK_M: params.BLOCK_M, BLOCK_N: reduceBlockN },
    params: { WORLD: world, BLOCK_M: params.BLOCK_M, BLOCK_N: reduceBlockN, N, split: shape.split },
  });
  const buffers: Buffer[] = [
    { name: GEMM_RS_BUFFERS.a, shape: [at, K], dtype: o.dtype, symmetric: false, init: "random" },
    { name: GEMM_RS_BUFFERS.b, shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: partial, shape: [at, N], dtype: o.dtype, symmetric: false, init: "poison" },
    // Peer p's partial rows of this rank's slab land at rows p·m (the rank's own stay unused: reduced in place).
    { name: GEMM_RS_BUFFERS.partials, shape: [at, N], dtype: o.dtype, symmetric: true, init: "poison" },
    { name: GEMM_RS_BUFFERS.out, shape: [at / world, N], dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(slots, false),
  ];
  checkDistinctBuffers(buffers);
  // A placeholder shaped like the segments: instantiateRows fills it at every M (and at `at` below).
  const segmentTable: Table = { name: SEGMENTS, dtype: "int64", values: segments.map((r) => r.flatMap((seg) => seg.map(() => 0))) };
  const symbolic: Manifest = {
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots, bits: 32 },
    tables: [segmentTable],
    kernels: [producer, push, reduce],
    hostOps: [],
    reference: {
      operator: "gemm-rs",
      M: at,
      N,
      K,
      inputs: { A: GEMM_RS_BUFFERS.a, B: GEMM_RS_BUFFERS.b },
      output: GEMM_RS_BUFFERS.out,
      rowsPerRank: at / world,
      tolerance: o.tolerance,
    },
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
    rows: {
      variable: ROWS_VARIABLE,
      range: { min: shape.min, max: shape.max },
      multiple: world,
      at,
      buffers: {
        [GEMM_RS_BUFFERS.a]: maps.M,
        [partial]: maps.M,
        [GEMM_RS_BUFFERS.partials]: maps.M,
        [GEMM_RS_BUFFERS.out]: maps.rowsPerRank,
      },
      hostOps: [],
      numPidM: maps.numPidM,
      tables: { [SEGMENTS]: segments.map((r) => r.flatMap((seg) => [...seg])) },
      ...(req.fallbackBelow === undefined ? {} : { fallbackBelow: req.fallbackBelow }),
      ...(req.fallbackReason === undefined ? {} : { fallbackReason: req.fallbackReason }),
    },
  };
  // The concrete fields are the instantiation at `at`; the kernels keep their row-count argument and maps over it.
  const concrete = instantiateRows(symbolic, at);
  const manifest = validated({ ...concrete, kernels: symbolic.kernels, rows: symbolic.rows });
  const files = [
    { path: producer.source, text: t.source },
    { path: "sm_push.py", text: smPushSource(comm, { dtype: o.dtype }) },
    {
      path: "rs_reduce_rows.py",
      text: rsReduceRowsSource(
        {
          WORLD: world,
          BLOCK_M: params.BLOCK_M,
          BLOCK_N: reduceBlockN,
          N,
          rowsPerRank: maps.rowsPerRank,
          blocks: maps.reduceBlocks,
          slots: maps.reduceSlots,
        },
        { dtype: o.dtype },
      ),
    },
  ];
  return { files, manifest };
}
