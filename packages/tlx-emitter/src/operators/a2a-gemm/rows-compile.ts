// Compiling AllToAll+GEMM for any row count (`Operator.rows`): the consumer body over the run-time rows
// (`../rows-consumer.ts`) with the order and waits of `rows.ts`, the AllToAll as host copies over M, the whole plan
// checked at every M served, and the manifest written at the operator's M with its `rows` section.
import { operatorGemmParams } from "../../core/gemm-params.js";
import { checkDistinctBuffers, signalBuffer, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { MANIFEST_SCHEMA, type Buffer, type Manifest } from "../../core/manifest/schema.js";
import type { Operator, RowsRequest } from "../../core/operator.js";
import { resolveOptions } from "../../core/options.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { rowsShape } from "../ag-gemm/rows.js";
import { consumerRowsBody, consumerRowsKernel } from "../rows-consumer.js";
import { checkRowsAt, rowsManifest, rowsSection } from "../rows-mode.js";
import { a2aRowsHostOps, a2aRowsMaps, checkA2aGemmRows } from "./rows.js";
import { a2aReference, allToAllSource } from "./triton.js";

/** The buffer the GEMM reads the received rows from (the torch API copies the exchanged operand out of it). */
const RECEIVED = "A";

/**
 * Compile `op` (an `a2a-gemm` whose plan is a row AllToAll, at its problem's M) into one operator serving every row
 * count of `req`: M is every rank's rows (its send buffer `[M, K]` and its output `[M, N]`), a multiple of the world.
 * The manifest describes it at `op.problem.M`; its `rows` section makes it concrete at another M (`instantiateRows`).
 * @throws {EmitError} `bad-plan` for a plan that is not a row AllToAll; `bad-param` for a body or a range rows mode
 *   cannot serve; `bad-schedule` when the plan fails its check at some M (a bug, named with the M).
 */
export async function compileA2aGemmRows(op: Operator, req: RowsRequest): Promise<EmitResult> {
  const o = resolveOptions(op.options ?? {});
  const send = allToAllSource(op);
  if (send === RECEIVED) throw new EmitError("bad-plan", `the AllToAll's send buffer must not be ${RECEIVED}, the received rows`);
  const { M: at, N, K } = op.problem;
  const world = op.plan.mesh.shape.reduce((a, b) => a * b, 1);
  const body = await consumerRowsBody(op);
  const params = operatorGemmParams(op);
  const shape = rowsShape(req, world, params.BLOCK_M, K);
  const maps = a2aRowsMaps(shape);
  checkRowsAt(at, shape, world);
  const hostOps = a2aRowsHostOps(shape, maps, send, RECEIVED);
  checkA2aGemmRows(shape, maps, hostOps);
  const b: Buffer = { name: "gemm_b", shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" };
  const c: Buffer = { name: "gemm_c", shape: [at, N], dtype: o.dtype, symmetric: false, init: "poison" };
  const slots = world * shape.split;
  const buffers: Buffer[] = [
    // Every received row is written by a copy (the own slab's too): it starts poisoned.
    { name: RECEIVED, shape: [at, K], dtype: o.dtype, symmetric: true, init: "poison" },
    { name: send, shape: [at, K], dtype: o.dtype, symmetric: true, init: "random" },
    b,
    c,
    signalBuffer(slots, true),
  ];
  checkDistinctBuffers(buffers);
  const { entry, file } = consumerRowsKernel(op, o, body, params, maps, at, { operator: "a2a-gemm", a: RECEIVED, b: b.name, c: c.name });
  const symbolic: Manifest = {
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots, bits: 32 },
    tables: [],
    kernels: [entry],
    hostOps: [],
    reference: a2aReference({ M: at, N, K }, send, b.name, c.name, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
    rows: rowsSection(req, shape, world, at, {
      buffers: { [RECEIVED]: maps.M, [send]: maps.M, [c.name]: maps.M },
      hostOps,
      numPidM: maps.numPidM,
    }),
  };
  return { files: [file], manifest: rowsManifest(symbolic) };
}
