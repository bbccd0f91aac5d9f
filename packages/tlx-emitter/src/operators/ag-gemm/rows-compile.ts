// Compiling AllGather+GEMM for any row count (`Operator.rows`): the consumer body transformed with the
// tile order and wait slots of `rows.ts` printed over the inserted `ovl_rows` parameter, the body's own
// `M` bound to the call's row count, the swizzle push AllGather as host ops over M, the whole plan
// checked at every M served, and the manifest written at the operator's M with its `rows` section.
import { agGemmReference, checkDistinctBuffers, signalBuffer, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { LOCAL_CONSUMER_KIND } from "../../backends/triton/consumer.js";
import { bindGemm } from "../../core/bind.js";
import { builtinBody } from "../../core/builtin.js";
import { MANIFEST_SCHEMA, type Buffer, type Manifest } from "../../core/manifest/schema.js";
import type { Operator } from "../../core/operator.js";
import { gemmLaunch, resolveOptions } from "../../core/options.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { parseLocalKernel, transformLocalKernel } from "../../local/index.js";
import { consumerInsertedArgs } from "../../schedule/maps.js";
import type { RowsRequest } from "../../core/operator.js";
import { isFp8 } from "../../core/dtype.js";
import { checkFp8, FP8_TEMPLATE_PARAMS, fp8Buffers, SCALE_A, SCALE_B, scaleBindings } from "./fp8.js";
import { checkRowsAt, checkRowsBody, rowsGemmParams, rowsManifest, rowsSection } from "../rows-mode.js";
import { agRowsHostOps, agRowsMaps, agRowsTileMaps, checkAgGemmRows, ROWS_VARIABLE, rowsShape } from "./rows.js";

/** ovl's stream-K body, which the any-row-count operator swaps for the flattened one (see compileAgGemmRows). */
const STREAM_K_BODY = "gemm_tma_persistent_streamk.py";

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
  // Stream-K cuts the last wave's tiles by k-steps, a split fixed by M's tile count: the any-row-count operator runs
  // the same configuration on the flattened persistent body instead.
  const body = op.body.path === STREAM_K_BODY ? builtinBody("gemm_tma_persistent_flat") : op.body;
  const kernel = await parseLocalKernel(body.source, body.path, body.entry);
  if (kernel.role !== "consumer" || kernel.waitsPer === "kv-block") {
    throw new EmitError("bad-param", `${body.path}: rows mode needs a GEMM consumer body (# ovl: consumer gather=<param>, tile m=)`);
  }
  const names = checkRowsBody(kernel, body.path);
  const params = rowsGemmParams(op);
  const shape = rowsShape(req, world, params.BLOCK_M, K);
  const maps = agRowsMaps(shape);
  checkRowsAt(at, shape, world);
  const tensor = "A";
  const hostOps = agRowsHostOps(shape, maps, tensor);
  checkAgGemmRows(shape, maps, hostOps);
  const { order, slots } = agRowsTileMaps(maps);
  const t = transformLocalKernel(kernel, { role: "consumer", order, slots, tables: [], scalars: [ROWS_VARIABLE] });
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
  const own = bindGemm(
    names,
    { buffers: { a: tensor, b: b.name, c: c.name }, params: { a: kernel.operand }, ...params },
    { M: { kind: "arg", arg: { kind: "rows" } }, ...(fp8 === undefined ? {} : scaleBindings()), ...op.bind },
  );
  const entry = localKernelEntry(t, {
    name: op.name,
    kind: LOCAL_CONSUMER_KIND,
    stream: "compute",
    grid: [{ kind: "num-sms" }],
    ...gemmLaunch(o, params),
    own,
    inserted: { ...consumerInsertedArgs([]), [ROWS_VARIABLE]: { kind: "rows" } },
    params: {
      ...params,
      body: body.path,
      entry: kernel.entry,
      operator: "ag-gemm",
      slotColumns: slots.length,
      a: tensor,
      b: b.name,
      c: c.name,
      ...(fp8 === undefined ? {} : FP8_TEMPLATE_PARAMS),
    },
    tileProgram: { role: "consumer", order, slots, numPidM: Math.ceil(at / params.BLOCK_M), numPidN: Math.ceil(N / params.BLOCK_N) },
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
  return { files: [{ path: entry.source, text: t.source }], manifest: rowsManifest(symbolic) };
}
