// The consumer GEMM of an any-row-count operator that moves rows before its GEMM (AllGather+GEMM, AllToAll+GEMM):
// the local body (stream-K swapped for the flattened persistent one) transformed with the tile order and wait slots
// of `ag-gemm/rows.ts` printed over the inserted `ovl_rows` parameter, the body's own `M` bound to the call's row
// count, on a persistent grid whose size does not depend on M.
import { localKernelEntry } from "../backends/triton/kernel-entry.js";
import { LOCAL_CONSUMER_KIND } from "../backends/triton/consumer.js";
import type { GemmParams } from "../backends/triton/kernels/index.js";
import { bindGemm, type Binding } from "../core/bind.js";
import { builtinBody } from "../core/builtin.js";
import type { Kernel } from "../core/manifest/schema.js";
import type { Operator } from "../core/operator.js";
import { gemmLaunch, type ResolvedOptions } from "../core/options.js";
import { EmitError } from "../core/writer/index.js";
import { parseLocalKernel, transformLocalKernel } from "../local/index.js";
import { consumerInsertedArgs } from "../schedule/maps.js";
import { agRowsTileMaps, ROWS_VARIABLE, type AgRowsMaps } from "./ag-gemm/rows.js";
import { checkRowsBody } from "./rows-mode.js";

/** ovl's stream-K body, which the any-row-count operator swaps for the flattened one. */
const STREAM_K_BODY = "gemm_tma_persistent_streamk.py";

/** The buffers the consumer reads and writes, and what the operator adds to its bindings and template params. */
export interface ConsumerRowsSpec {
  /** The manifest's operator (`ag-gemm`, `a2a-gemm`), written into the template params. */
  readonly operator: string;
  readonly a: string;
  readonly b: string;
  readonly c: string;
  /** Bindings of the body's other parameters (fp8's scales). */
  readonly bind?: Readonly<Record<string, Binding>>;
  /** More template params (fp8's). */
  readonly templateParams?: Readonly<Record<string, number | string | boolean>>;
}

/** A consumer body, parsed and checked for rows mode. */
export interface ConsumerRowsBody {
  readonly path: string;
  readonly kernel: Awaited<ReturnType<typeof parseLocalKernel>>;
  readonly names: string[];
}

/**
 * `op`'s body for rows mode: stream-K cuts the last wave's tiles by k-steps, a split fixed by M's tile count, so the
 * any-row-count operator runs the same configuration on the flattened persistent body instead.
 * @throws {EmitError} `bad-param` for a body that is not a persistent GEMM consumer with a parameter `M`.
 */
export async function consumerRowsBody(op: Operator): Promise<ConsumerRowsBody> {
  const body = op.body.path === STREAM_K_BODY ? builtinBody("gemm_tma_persistent_flat") : op.body;
  const kernel = await parseLocalKernel(body.source, body.path, body.entry);
  if (kernel.role !== "consumer" || kernel.waitsPer === "kv-block") {
    throw new EmitError("bad-param", `${body.path}: rows mode needs a GEMM consumer body (# ovl: consumer gather=<param>, tile m=)`);
  }
  return { path: body.path, kernel, names: checkRowsBody(kernel, body.path) };
}

/** The consumer's kernel entry over the run-time rows and its source, at the operator's M `at`. */
export function consumerRowsKernel(
  op: Operator,
  o: ResolvedOptions,
  body: ConsumerRowsBody,
  params: GemmParams,
  maps: AgRowsMaps,
  at: number,
  spec: ConsumerRowsSpec,
): { entry: Kernel; file: { path: string; text: string } } {
  const { kernel } = body;
  const { order, slots } = agRowsTileMaps(maps);
  const t = transformLocalKernel(kernel, { role: "consumer", order, slots, tables: [], scalars: [ROWS_VARIABLE] });
  const own = bindGemm(
    body.names,
    { buffers: { a: spec.a, b: spec.b, c: spec.c }, params: { a: kernel.operand }, ...params },
    { M: { kind: "arg", arg: { kind: "rows" } }, ...spec.bind, ...op.bind },
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
      operator: spec.operator,
      slotColumns: slots.length,
      a: spec.a,
      b: spec.b,
      c: spec.c,
      ...spec.templateParams,
    },
    tileProgram: {
      role: "consumer",
      order,
      slots,
      numPidM: Math.ceil(at / params.BLOCK_M),
      numPidN: Math.ceil(params.N / params.BLOCK_N),
    },
  });
  return { entry, file: { path: entry.source, text: t.source } };
}
