// Compiling AllGather+GEMM for any row count (`Operator.rows`): the consumer body transformed with the
// tile order and wait slots of `rows.ts` printed over the inserted `ovl_rows` parameter, the body's own
// `M` bound to the call's row count, the swizzle push AllGather as host ops over M, the whole plan
// checked at every M served, and the manifest written at the operator's M with its `rows` section.
import { operatorGemmParams } from "../../core/gemm-params.js";
import { agGemmReference, checkDistinctBuffers, signalBuffer, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { MANIFEST_SCHEMA, type Buffer, type Manifest } from "../../core/manifest/schema.js";
import type { Operator } from "../../core/operator.js";
import { resolveOptions } from "../../core/options.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import type { RowsRequest } from "../../core/operator.js";
import { isFp8 } from "../../core/dtype.js";
import { checkFp8, FP8_TEMPLATE_PARAMS, fp8Buffers, SCALE_A, SCALE_B, scaleBindings } from "./fp8.js";
import { checkRowsAt, rowsManifest, rowsSection } from "../rows-mode.js";
import { consumerRowsBody, consumerRowsKernel } from "../rows-consumer.js";
import { agRowsHostOps, agRowsMaps, checkAgGemmRows, rowsShape } from "./rows.js";

/** The plan template a rows-generic AllGather+GEMM realises at every M. */
export const ROWS_PLAN = "all-gather-swizzle-push";

/**
 * Compile `op` (an `ag-gemm` whose `plan` is the swizzle push AllGather, at its problem's M) into one operator
 * serving every row count of `rows`. The emitted manifest describes it at `op.problem.M`; its `rows` section
 * says how to make it concrete at another M (`instantiateRows`).
 * @throws {EmitError} `bad-param` for a body, plan or range rows mode cannot serve; `bad-schedule` when the
 *   plan fails its check at some M (a bug, named with the M).
 */
export async function compileAgGemmRows(op: Operator, req: RowsRequest): Promise<EmitResult> {
  const o = resolveOptions(op.options ?? {});
  if (isFp8(o.dtype)) checkFp8(op);
  const { M: at, N, K } = op.problem;
  const world = op.plan.mesh.shape.reduce((a, b) => a * b, 1);
  if (op.plan.name !== ROWS_PLAN) {
    throw new EmitError("bad-param", `rows mode realises the ${ROWS_PLAN} plan at every row count; plan "${op.plan.name}" is another`);
  }
  const body = await consumerRowsBody(op);
  const params = operatorGemmParams(op);
  const shape = rowsShape(req, world, params.BLOCK_M, K);
  const maps = agRowsMaps(shape);
  checkRowsAt(at, shape, world);
  const tensor = "A";
  const hostOps = agRowsHostOps(shape, maps, tensor);
  checkAgGemmRows(shape, maps, hostOps);
  // fp8e4m3: Bt [N, K], a bf16 C and the two scales (`fp8.ts`).
  const fp8 = isFp8(o.dtype) ? fp8Buffers({ M: at, N, K }, o.dtype) : undefined;
  const b: Buffer = fp8?.b ?? { name: "gemm_b", shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" };
  const c: Buffer = fp8?.c ?? { name: "gemm_c", shape: [at, N], dtype: o.dtype, symmetric: false, init: "poison" };
  const buffers: Buffer[] = [
    { name: tensor, shape: [at, K], dtype: o.dtype, symmetric: true, init: "random" },
    b,
    ...(fp8?.scales ?? []),
    c,
    signalBuffer(world * shape.split, true),
  ];
  checkDistinctBuffers(buffers);
  const { entry, file } = consumerRowsKernel(op, o, body, params, maps, at, {
    operator: "ag-gemm",
    a: tensor,
    b: b.name,
    c: c.name,
    ...(fp8 === undefined ? {} : { bind: scaleBindings(), templateParams: FP8_TEMPLATE_PARAMS }),
  });
  const symbolic: Manifest = {
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: world * shape.split, bits: 32 },
    tables: [],
    kernels: [entry],
    hostOps: [],
    reference: agGemmReference(
      tensor,
      { M: at, N, K },
      world,
      o.tolerance,
      fp8 === undefined ? undefined : { B: b.name, scale_a: SCALE_A, scale_b: SCALE_B },
    ),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
    rows: rowsSection(req, shape, world, at, { buffers: { [tensor]: maps.M, [c.name]: maps.M }, hostOps, numPidM: maps.numPidM }),
  };
  return { files: [file], manifest: rowsManifest(symbolic) };
}
