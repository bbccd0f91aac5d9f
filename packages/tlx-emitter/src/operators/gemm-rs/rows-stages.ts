// The stages GEMM+ReduceScatter and the partitioned GEMM+AllReduce share when the row count is a run-time argument:
// the producer body transformed with the tile order and notify slots of `rows.ts` over the inserted `ovl_rows`
// parameter (the body's own `M` bound to the call's row count), and the SM pushes whose segment table is
// instantiated per M, the plan's GEMM+RS half checked at every M served; and the rows-generic reduction's parameters
// and launch. What the reduction reads and writes, the output and the manifest are the operator's.
import { operatorGemmParams } from "../../core/gemm-params.js";
import type { Expr } from "@ovl/mapping";
import { staticMap } from "@ovl/mapping";
import { kernelEntry, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import {
  checkSmCommParams,
  type GemmParams,
  type KernelTemplateInfo,
  type RsReduceRowsParams,
  smPushSource,
} from "../../backends/triton/kernels/index.js";
import { alignmentUnit } from "../../backends/triton/kernels/sm-comm.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { bindGemm } from "../../core/bind.js";
import type { Buffer, Kernel, KernelArg, Table } from "../../core/manifest/schema.js";
import type { Operator, RowsRequest } from "../../core/operator.js";
import { type ResolvedOptions, gemmLaunch, resolveOptions } from "../../core/options.js";
import type { EmittedFile } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { parseLocalKernel, transformLocalKernel } from "../../local/index.js";
import { RANK_VAR } from "../../schedule/maps.js";
import { ROWS_VARIABLE } from "../ag-gemm/rows.js";
import { checkRowsAt, checkRowsBody } from "../rows-mode.js";
import { checkGemmRsRows, type RsRowsMaps, type RsRowsShape, rsRowsMaps, rsRowsSegments, rsRowsShape, rsRowsSlots } from "./rows.js";
import { GEMM_RS_BUFFERS, PUSH_SEGMENTS, smPushKernel } from "./template.js";
import { LOCAL_PRODUCER_KIND } from "./triton.js";

/** The shared stages over M rows (see the module comment); buffers, tables and rows expressions in manifest order. */
export interface RsRowsStages {
  readonly o: ResolvedOptions;
  readonly world: number;
  /** The M the manifest describes. */
  readonly at: number;
  readonly params: GemmParams;
  readonly shape: RsRowsShape;
  readonly maps: RsRowsMaps;
  /** Signal slots of these stages (arrivals, then tile-done); later stages number theirs from here. */
  readonly slots: number;
  /** `gemm_a`, `gemm_b`, the partial product and `partials` (`[M, N]`: peer p's rows of this slab at rows p·m). */
  readonly buffers: Buffer[];
  /** Rows of the row-scaled buffers, over `ovl_rows`. */
  readonly rowsBuffers: Record<string, Expr>;
  /** The push segments (a placeholder shaped like them) and their per-rank expressions. */
  readonly tables: Table[];
  readonly rowsTables: Record<string, Expr[][]>;
  /** The producer, then `sm_push`. */
  readonly kernels: Kernel[];
  readonly files: EmittedFile[];
}

/**
 * The GEMM+RS stages of `op` (its plan checked by the caller) for every row count of `req`, moving partial rows with
 * SM pushes (`options.backend` "sm" or unset). `partial`: the plan's partial tensor; `operator`: the producer's
 * `template.params.operator`; `what`: the operator, in refusals.
 * @throws {EmitError} `bad-param` for a body, backend or range rows mode cannot serve; `bad-schedule` when the
 *   plan fails its check at some M (a bug, named with the M).
 */
export async function rsRowsStages(
  op: Operator,
  req: RowsRequest,
  partial: string,
  operator: "gemm-rs" | "gemm-ar",
  what: string,
): Promise<RsRowsStages> {
  if (op.options?.backend !== undefined && op.options.backend !== "sm") {
    throw new EmitError(
      "bad-param",
      `rows mode delivers ${what}'s partial rows with SM pushes; backend "${op.options.backend}" is another`,
    );
  }
  const o = resolveOptions({ ...op.options, backend: "sm" });
  const { M: at, N, K } = op.problem;
  const world = op.plan.mesh.shape.reduce((a, b) => a * b, 1);
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "producer" || kernel.rows !== undefined) {
    throw new EmitError("bad-param", `${op.body.path}: rows mode needs a GEMM producer body (# ovl: producer scatter=<param>)`);
  }
  const names = checkRowsBody(kernel, op.body.path);
  const unit = alignmentUnit(o.dtype);
  if (N % unit) {
    throw new EmitError(
      "bad-param",
      `rows mode pushes whole rows 16-byte aligned at every M: N (${N}) must be a multiple of ${unit} ${o.dtype} elements`,
    );
  }
  const params = operatorGemmParams(op);
  const shape = rsRowsShape(req, world, params.BLOCK_M, params.BLOCK_N, N);
  const maps = rsRowsMaps(shape);
  checkRowsAt(at, shape, world);
  const segments = rsRowsSegments(shape, maps);
  checkGemmRsRows(shape, maps, segments, unit);

  const order = staticMap(maps.order);
  const notify = maps.notify.map((e) => staticMap(e));
  const t = transformLocalKernel(kernel, {
    role: "producer",
    order,
    slots: notify,
    // Only this rank's sm-push kernel waits on the tile-done slots, and it releases what it moves itself.
    notifyScope: "gpu",
    // At K step 1 of the program's next tile, as the per-M producer (gemm-rs/triton.ts says why).
    notifyAt: "next-tile",
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
      operator,
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
  const push = smPushKernel(o, partial, count, comm);
  const buffers: Buffer[] = [
    { name: GEMM_RS_BUFFERS.a, shape: [at, K], dtype: o.dtype, symmetric: false, init: "random" },
    { name: GEMM_RS_BUFFERS.b, shape: [K, N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: partial, shape: [at, N], dtype: o.dtype, symmetric: false, init: "poison" },
    // Peer p's partial rows of this rank's slab land at rows p·m (the rank's own stay unused: reduced in place).
    { name: GEMM_RS_BUFFERS.partials, shape: [at, N], dtype: o.dtype, symmetric: true, init: "poison" },
  ];
  return {
    o,
    world,
    at,
    params,
    shape,
    maps,
    slots: rsRowsSlots(shape),
    buffers,
    rowsBuffers: { [GEMM_RS_BUFFERS.a]: maps.M, [partial]: maps.M, [GEMM_RS_BUFFERS.partials]: maps.M },
    // A placeholder shaped like the segments: instantiateRows fills it at every M.
    tables: [{ name: PUSH_SEGMENTS, dtype: "int64", values: segments.map((r) => r.flatMap((seg) => seg.map(() => 0))) }],
    rowsTables: { [PUSH_SEGMENTS]: segments.map((r) => r.flatMap((seg) => [...seg])) },
    kernels: [producer, push],
    files: [
      { path: producer.source, text: t.source },
      { path: "sm_push.py", text: smPushSource(comm, { dtype: o.dtype }) },
    ],
  };
}

/**
 * The parameters of the rows-generic reduction over the stages `s` (`rs-reduce-rows`, `ar-reduce-broadcast-rows`:
 * every m-block of the rank's slab summed over the peers' delivered rows), `blockN` columns a program.
 */
export function reduceRowsParams(s: RsRowsStages, blockN: number): RsReduceRowsParams {
  return {
    WORLD: s.world,
    BLOCK_M: s.params.BLOCK_M,
    BLOCK_N: blockN,
    N: s.params.N,
    rowsPerRank: s.maps.rowsPerRank,
    blocks: s.maps.reduceBlocks,
    slots: s.maps.reduceSlots,
  };
}

/**
 * The rows-generic reduction `info` as kernel `name` on the compute stream (on every SM, or `reducePrograms`
 * programs), over the parameters `p` of the stages `s`; `args` its arguments, `extra` its further parameters.
 */
export function reduceRowsKernel(
  info: KernelTemplateInfo,
  name: string,
  s: RsRowsStages,
  p: RsReduceRowsParams,
  args: Record<string, KernelArg>,
  extra: Record<string, number> = {},
): Kernel {
  return kernelEntry(info, {
    name,
    stream: "compute",
    grid: s.o.reducePrograms === undefined ? [{ kind: "num-sms" }] : [s.o.reducePrograms],
    numWarps: 4,
    numStages: 1,
    args,
    constexprs: { WORLD: p.WORLD, BLOCK_M: p.BLOCK_M, BLOCK_N: p.BLOCK_N },
    params: { WORLD: p.WORLD, BLOCK_M: p.BLOCK_M, BLOCK_N: p.BLOCK_N, N: p.N, split: s.shape.split, ...extra },
  });
}
