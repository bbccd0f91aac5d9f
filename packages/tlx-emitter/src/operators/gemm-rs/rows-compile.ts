// Compiling GEMM+ReduceScatter for any row count (`Operator.rows`): the shared stages of `rows-stages.ts` (the
// producer and the SM pushes over `ovl_rows`, checked at every M served), then the rows-generic reduction
// (`rs-reduce-rows`) into `rs_out`, and the manifest written at the operator's M with its `rows` section.
import { checkDistinctBuffers, SIGNAL_BUFFER, signalBuffer } from "../../backends/triton/common.js";
import { RS_REDUCE_ROWS, rsReduceBlockN, rsReduceRowsSource } from "../../backends/triton/kernels/index.js";
import { MANIFEST_SCHEMA, type Buffer, type Manifest } from "../../core/manifest/schema.js";
import type { Operator, RowsRequest } from "../../core/operator.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { rowsManifest, rowsSection } from "../rows-mode.js";
import { gemmRsReference } from "./problem.js";
import { reduceRowsKernel, reduceRowsParams, rsRowsStages } from "./rows-stages.js";
import { GEMM_RS_BUFFERS } from "./template.js";
import { partialTensor } from "./triton.js";

/** The plan template a rows-generic GEMM+ReduceScatter realises at every M. */
export const RS_ROWS_PLAN = "reduce-scatter-direct";

/**
 * Compile `op` (a `gemm-rs` whose plan is the direct ReduceScatter after compute, at its problem's M) into one
 * operator serving every row count of `req`. Its partial rows move with SM pushes (`options.backend` "sm" or
 * unset). The emitted manifest describes it at `op.problem.M`; its `rows` section says how to make it concrete
 * at another M (`instantiateRows`).
 * @throws {EmitError} `bad-param` for a body, plan, backend or range rows mode cannot serve; `bad-schedule`
 *   when the plan fails its check at some M (a bug, named with the M).
 */
export async function compileGemmRsRows(op: Operator, req: RowsRequest): Promise<EmitResult> {
  if (op.plan.name !== RS_ROWS_PLAN) {
    throw new EmitError("bad-param", `rows mode realises the ${RS_ROWS_PLAN} plan at every row count; plan "${op.plan.name}" is another`);
  }
  const partial = partialTensor(op);
  const s = await rsRowsStages(op, req, partial, "gemm-rs", "GEMM+ReduceScatter");
  const { o, world, at, params, shape, maps } = s;
  const { N, K } = params;
  const p = reduceRowsParams(s, o.reduceBlockN ?? rsReduceBlockN(params.BLOCK_M));
  const reduce = reduceRowsKernel(RS_REDUCE_ROWS, "rs_reduce_rows", s, p, {
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
  });
  const buffers: Buffer[] = [
    ...s.buffers,
    { name: GEMM_RS_BUFFERS.out, shape: [at / world, N], dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(s.slots, false),
  ];
  checkDistinctBuffers(buffers);
  const symbolic: Manifest = {
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: s.slots, bits: 32 },
    tables: s.tables,
    kernels: [...s.kernels, reduce],
    hostOps: [],
    reference: gemmRsReference(at, N, K, at / world, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
    rows: rowsSection(req, shape, world, at, {
      buffers: { ...s.rowsBuffers, [GEMM_RS_BUFFERS.out]: maps.rowsPerRank },
      hostOps: [],
      numPidM: maps.numPidM,
      tables: s.rowsTables,
    }),
  };
  const source = rsReduceRowsSource(p, { dtype: o.dtype });
  return { files: [...s.files, { path: "rs_reduce_rows.py", text: source }], manifest: rowsManifest(symbolic) };
}
