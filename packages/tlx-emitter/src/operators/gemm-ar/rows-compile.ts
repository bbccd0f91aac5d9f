// Compiling the partitioned GEMM+AllReduce for any row count (`Operator.rows`): the GEMM+RS stages of
// `../gemm-rs/rows-stages.ts` over `ovl_rows`, `ar-reduce-broadcast-rows` storing each reduced tile into every rank's
// output, `ar_done` waiting for every peer's slab (its table instantiated per M), the whole plan checked at every M
// served, and the manifest written at the operator's M with its `rows` section.
import { checkDistinctBuffers, SIGNAL_BUFFER, signalBuffer, slotWaitStage } from "../../backends/triton/common.js";
import { AR_REDUCE_BROADCAST_ROWS, arReduceBroadcastRowsSource } from "../../backends/triton/kernels/index.js";
import { MANIFEST_SCHEMA, type Buffer, type Manifest } from "../../core/manifest/schema.js";
import type { Operator, RowsRequest } from "../../core/operator.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { reduceRowsKernel, reduceRowsParams, rsRowsStages } from "../gemm-rs/rows-stages.js";
import { rowsManifest, rowsSection } from "../rows-mode.js";
import { AR_PLANS, allReduceForm } from "./movements.js";
import { AR_BROADCAST_BLOCK_N, AR_STREAMS, checkWholeSlabGathers, GEMM_AR_BUFFERS, gemmArReference } from "./partitioned.js";
import { arRowsWaits, checkGemmArRows } from "./rows.js";

/**
 * Compile `op` (a `gemm-ar` whose plan is the partitioned all-reduce, at its problem's M) into one operator serving
 * every row count of `req`, over SM pushes and stores (`options.backend` "sm" or unset). Every rank ends with the
 * full sum `ar_out` `[M, N]`. The manifest describes it at `op.problem.M`; its `rows` section makes it concrete at
 * another M (`instantiateRows`).
 * @throws {EmitError} `bad-param` for a plan (the tile-wise one, an AllGather half that does not send whole slabs),
 *   body, backend or range rows mode cannot serve; `bad-schedule` when the plan fails its check at some M.
 */
export async function compileGemmArRows(op: Operator, req: RowsRequest): Promise<EmitResult> {
  const form = allReduceForm(op.plan, op.problem.M, op.problem.N);
  if (form.kind !== "partitioned") {
    throw new EmitError(
      "bad-param",
      `rows mode realises the partitioned GEMM+AllReduce (${AR_PLANS.partitioned}); the tile-wise plan is per M`,
    );
  }
  const world = op.plan.mesh.shape.reduce((a, b) => a * b, 1);
  checkWholeSlabGathers(form.gathers, world, op.problem.M / world);
  const s = await rsRowsStages(op, req, form.src, "gemm-ar", "GEMM+AllReduce");
  const { o, at, params, shape, maps } = s;
  const { N, K } = params;
  const blockN = o.reduceBlockN ?? AR_BROADCAST_BLOCK_N;
  const recvBase = s.slots;
  const waits = arRowsWaits(shape, maps, blockN, recvBase);
  checkGemmArRows(shape, waits, blockN, recvBase);
  const p = reduceRowsParams(s, blockN);
  const reduce = reduceRowsKernel(
    AR_REDUCE_BROADCAST_ROWS,
    "ar_reduce_broadcast_rows",
    s,
    p,
    {
      part_ptr: { kind: "buffer", name: GEMM_AR_BUFFERS.partials },
      own_ptr: { kind: "buffer", name: form.src },
      out_ptrs: { kind: "peer-pointers", buffer: GEMM_AR_BUFFERS.out },
      sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      sig_ptrs: { kind: "peer-pointers", buffer: SIGNAL_BUFFER },
      err_ptr: { kind: "error-buffer" },
      N: { kind: "int", value: N },
      rank: { kind: "rank" },
      epoch_ptr: { kind: "epoch-word" },
      timeout_ns: { kind: "timeout-ns" },
      ovl_rows: { kind: "rows" },
      recv_base: { kind: "int", value: recvBase },
    },
    { recv_base: recvBase },
  );
  // `ar_done` over a placeholder table shaped like the waits; instantiateRows fills it at every M.
  const done = slotWaitStage(
    AR_STREAMS.done,
    waits.map((r) => Array.from({ length: r.length / 2 }, () => [0, 1])),
    o.dtype,
  );
  const slots = recvBase + world;
  const buffers: Buffer[] = [
    ...s.buffers,
    { name: GEMM_AR_BUFFERS.out, shape: [at, N], dtype: o.dtype, symmetric: true, init: "poison" },
    signalBuffer(slots, false),
  ];
  checkDistinctBuffers(buffers);
  const symbolic: Manifest = {
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots, bits: 32 },
    tables: [...s.tables, done.table],
    kernels: [...s.kernels, reduce, done.kernel],
    hostOps: [],
    reference: gemmArReference(at, N, K, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
    rows: rowsSection(req, shape, world, at, {
      buffers: { ...s.rowsBuffers, [GEMM_AR_BUFFERS.out]: maps.M },
      hostOps: [],
      numPidM: maps.numPidM,
      tables: { ...s.rowsTables, [done.table.name]: waits },
    }),
  };
  const source = arReduceBroadcastRowsSource(p, { dtype: o.dtype });
  return {
    files: [...s.files, { path: "ar_reduce_broadcast_rows.py", text: source }, done.file],
    manifest: rowsManifest(symbolic),
  };
}
