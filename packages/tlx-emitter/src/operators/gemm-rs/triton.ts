// GEMM + ReduceScatter from a local kernel (AutoOverlap's producer side; TileLink's
// GEMM+RS): the body transformed to compute m-blocks in the plan's sending order and notify
// each tile's tile-done slots after its stores; the deliveries and the reduction are the
// GEMM+RS emitter's (copy engine or SM pushes, then `rs-reduce`).
import type { TileSchedule } from "@ovl/chunk-plan";
import type { EmitResult } from "../../core/result.js";
import { SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { emitGemmRs, type ProducerContext } from "./template.js";
import type { KernelArg, Table } from "../../core/manifest/schema.js";
import { parseLocalKernel, transformLocalKernel, type LocalKernel } from "../../local/index.js";
import { EmitError } from "../../core/writer/index.js";
import { bindGemm } from "../../core/bind.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { RANK_VAR, rankMap } from "../../schedule/maps.js";
import type { Operator } from "../../core/operator.js";
import { operatorSchedule } from "../../schedule/operator-schedule.js";

/** Template kind of a transformed producer body in the manifest. */
export const LOCAL_PRODUCER_KIND = "local-producer";

/**
 * Compile a GEMM+ReduceScatter operator: `op.plan` is a ReduceScatter of the body's output
 * after compute (e.g. `reduceScatterDirect({ afterCompute: true })`), the body computes each
 * rank's partial `A @ B`.
 * @throws {EmitError} as `emitGemmRs` does, and for a body that is not a producer;
 *   {LocalKernelError} for a body that cannot be transformed.
 */
export async function compileGemmRs(op: Operator, schedule?: TileSchedule): Promise<EmitResult> {
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "producer") {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: GEMM+ReduceScatter needs a producer body (# ovl: producer scatter=<param>); ${kernel.entry} is a ${kernel.role}`,
    );
  }
  const tensor = partialTensor(op);
  const sched = schedule ?? operatorSchedule(op, tensor, "producer", kernel.persistent);
  return emitGemmRs(op.plan, sched, { ...op.options, name: op.name }, (ctx) => producerKernel(op, kernel, ctx));
}

/**
 * The transformed producer body of `op` for a GEMM+RS or GEMM+AR context: tiles remapped to
 * the sending order, each notifying its slot after its stores.
 */
export function producerKernel(op: Operator, kernel: LocalKernel, ctx: ProducerContext) {
  // The body's linear tile t = m * numPidN + n is remapped to the same n of m-block order[m]:
  // tiles of the chunk sent first are computed first (the sending order is per m-block).
  const P = ctx.numPidN;
  const order = rankMap(
    "ovl_order",
    ctx.order.map((byM) => byM.flatMap((m) => Array.from({ length: P }, (_, n) => m * P + n))),
    "ovl_t",
  );
  // Per tile t = m * numPidN + n: its own slot where given, else its m-block's (shared by the m-block's tiles).
  const perTile = ctx.notifyTile ?? ctx.notify.map((byM) => byM.flatMap((s) => Array.from({ length: ctx.numPidN }, () => s)));
  const notify = rankMap("ovl_notify0", perTile, "ovl_t");
  const tables: Table[] = [order, notify].flatMap((b) => (b.table === undefined ? [] : [b.table]));
  const t = transformLocalKernel(kernel, {
    role: "producer",
    order: order.map,
    slots: [notify.map],
    notifyScope: ctx.notifyScope ?? "sys",
    // Each tile notifies at K step 1 of its program's next tile (notifyAt "next-tile"), its stores written by
    // then: the producer alone 1-2% faster at short K on an H200 than notifying at the tile, which waits for
    // those stores with the tensor cores idle (`results/runs/producer-notify-h200-2026-12-02`). A slot completes
    // one K step and an epilogue later; notifying after the next tile's whole K loop instead cost the operator
    // 0.6-5.3% end to end (`results/runs/deferred-notify-h200-2026-11-28`).
    notifyAt: "next-tile",
    numPidN: ctx.numPidN,
    tables: tables.map((x) => x.name),
  });
  const own = bindGemm(
    kernel.params.map((p) => p.name),
    { buffers: { a: ctx.a, b: ctx.b, c: ctx.partial }, params: { c: kernel.operand }, ...ctx.params },
    op.bind,
  );
  const inserted: Record<string, KernelArg> = {
    ...Object.fromEntries(tables.map((x) => [x.name, { kind: "table" as const, name: x.name }])),
    ovl_sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
    [RANK_VAR]: { kind: "rank" },
  };
  const name = `${op.name}_producer`;
  const entry = localKernelEntry(t, {
    name,
    kind: LOCAL_PRODUCER_KIND,
    stream: "compute",
    grid: kernel.persistent ? [{ kind: "num-sms", cap: ctx.numTiles, ...ctx.reserve }] : [ctx.numTiles],
    ...ctx.launch,
    own,
    inserted,
    params: {
      ...ctx.params,
      body: op.body.path,
      entry: kernel.entry,
      operator: ctx.operator ?? "gemm-rs",
      a: ctx.a,
      b: ctx.b,
      c: ctx.partial,
    },
    tileProgram: { role: "producer", order: order.map, slots: [notify.map], numPidM: ctx.order[0]?.length ?? 1, numPidN: P },
  });
  return { kernel: entry, file: { path: entry.source, text: t.source }, tables };
}

/** The tensor a GEMM+RS (or GEMM+AR) plan's first op waits to be computed (the partial product). */
export function partialTensor(op: Operator): string {
  for (const r of op.plan.ranks) {
    for (const s of r.streams) {
      for (const x of s) {
        const dep = x.deps.find((d) => d.kind === "compute");
        if (dep !== undefined && dep.kind === "compute") return dep.region.tensor;
      }
    }
  }
  throw new EmitError(
    "bad-plan",
    `plan "${op.plan.name}" never waits on compute; a GEMM+ReduceScatter plan sends tiles as the GEMM finishes them (afterCompute)`,
  );
}
