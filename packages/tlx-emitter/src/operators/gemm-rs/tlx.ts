// The TLX GEMM+ReduceScatter producer: the warp-specialised GEMM (cooperative or ping-pong
// consumers) visiting m-blocks in the plan's sending order, each tile notifying its
// tile-done slot after its TMA stores complete (TileLink's producer_tile_notify). It
// replaces the transformed Triton body in the GEMM+RS stages (`emitGemmRs`'s producer
// factory); deliveries and the reduction are the same.
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import { emitGemmRs, type ProducerFactory } from "./template.js";
import type { EmitOptions } from "../../core/options.js";
import { SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { tablesOf } from "../../schedule/maps.js";
import { EmitError } from "../../core/writer/index.js";
import { producerTileNotifyComm, storedLag, tileNotifyComm, tmaTileNotifyComm } from "../../backends/tlx/comm.js";
import { clusterOf, hopperGemmPart, tlxEntry, type TlxEmitOptions, type TlxEmitResult } from "../../backends/tlx/gemm.js";
import { mblockKernelArgs, mblockMap } from "../../backends/tlx/mblock-map.js";
import { tlxKernel } from "../../backends/tlx/parts.js";
import { TLX_NOTIFIERS, type Operator, type TlxNotifier } from "../../core/operator.js";
import type { EmitResult } from "../../core/result.js";
import { tlxKnobs } from "../../backends/tlx/knobs.js";
import { operatorSchedule } from "../../schedule/operator-schedule.js";
import { partialTensor } from "./triton.js";
import { groupedTiles } from "../../backends/tlx/tile-order.js";

/** Template kind of the TLX GEMM+RS producer in a manifest (the runner emulates it as `gemm-producer`). */
export const TLX_GEMM_RS_KIND = "tlx-gemm-rs";

const NOTIFIER_SUMMARY: Readonly<Record<TlxNotifier, string>> = {
  consumers: "each tile's tile-done slot is notified once its TMA stores are complete (a tile later).",
  producer: "each tile's tile-done slot is notified by the producer warp group once the consumers report its TMA stores complete.",
  tma: "each tile's tile-done slot is notified by a TMA reduce-add once its TMA stores are complete (a tile later).",
};

/** The warp-specialisation knobs of the producer (the tile and grouping come from the GEMM+RS stages). */
export type TlxProducerOptions = Pick<
  TlxEmitOptions,
  "stages" | "consumerRegisters" | "consumerSchedule" | "epilogueSplit" | "notifier" | "clusterM"
>;

/**
 * A producer factory for `emitGemmRs`: the TLX GEMM at the stages' tile (BLOCK_K as given),
 * its tile loop visiting m-blocks in the sending order (grouped by GROUP_M over visit rows)
 * and notifying each tile's m-block slot at the stages' scope — both maps printed inline where
 * one expression over (m-block, rank) fits every rank, else the tables `mblock_order` and
 * `mblock_notify_slot`; the manifest's tile program carries the same maps. Marked
 * precompiled for sm_90a (scripts/tlx-aot-compile.py builds the cubin).
 * @throws {EmitError} `unsupported-op` for per-tile slots (the tile-wise AllReduce), and
 *   `bad-param` for tilings the TLX GEMM refuses.
 */
export function tlxProducerFactory(options: TlxProducerOptions = {}): ProducerFactory {
  return (ctx) => {
    if (ctx.notifyTile !== undefined) {
      throw new EmitError(
        "unsupported-op",
        "the TLX producer notifies one slot per m-block; the tile-wise AllReduce (a slot per tile) needs the triton backend",
      );
    }
    const p = ctx.params;
    const { N, K } = p;
    if (K % 8 !== 0 || N % 8 !== 0)
      throw new EmitError("bad-param", `TMA needs 16-byte rows: K (${K}) and N (${N}) must be multiples of 8`);
    const tile = { BM: p.BLOCK_M, BN: p.BLOCK_N, BK: p.BLOCK_K };
    const notifier = options.notifier ?? "consumers";
    if (!(TLX_NOTIFIERS as readonly string[]).includes(notifier))
      throw new EmitError("bad-param", `notifier must be one of ${TLX_NOTIFIERS.join(", ")}, got ${String(notifier)}`);
    if (notifier === "producer" && (options.clusterM ?? 1) !== 1)
      throw new EmitError("bad-param", 'notifier "producer" counts tiles per program; with clusterM 2 use "consumers" or "tma"');
    const clusterM = clusterOf(options, ctx.numTiles / ctx.numPidN);
    const scope = ctx.notifyScope ?? "sys";
    const numSlots = Math.max(0, ...ctx.notify.flat()) + 1;
    // The sending order and each m-block's tile-done slot: inline where one expression over
    // (m-block, rank) fits every rank (a rank-rotated order, a chunk's slot), else tables.
    const order = mblockMap("mblock_order", ctx.order);
    const notify = mblockMap("mblock_notify_slot", ctx.notify);
    const kernel = tlxKernel({
      kind: TLX_GEMM_RS_KIND,
      entry: "tlx_gemm_rs",
      summary: `tlx-gemm-rs: C_partial = A @ B, m-blocks in sending order; ${NOTIFIER_SUMMARY[notifier]}`,
      compute: hopperGemmPart(tile, ctx.options.dtype, options),
      comm:
        notifier === "producer"
          ? producerTileNotifyComm(notify.map, scope, storedLag(options.consumerSchedule ?? "cooperative"))
          : notifier === "tma"
            ? tmaTileNotifyComm(notify.map, numSlots)
            : tileNotifyComm(notify.map, scope),
      schedule: groupedTiles({ groupM: p.GROUP_M, order: order.map, clusterM }),
    });
    const entry = tlxEntry(
      kernel,
      "tlx_gemm_rs",
      [{ kind: "num-sms", cap: ctx.numTiles, ...ctx.reserve }],
      {
        a_ptr: { kind: "buffer", name: ctx.a },
        b_ptr: { kind: "buffer", name: ctx.b },
        c_ptr: { kind: "buffer", name: ctx.partial },
        M: { kind: "int", value: p.M },
        N: { kind: "int", value: N },
        K: { kind: "int", value: K },
        ...mblockKernelArgs([order, notify]),
        sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      },
      {
        ...p,
        operator: ctx.operator ?? "gemm-rs",
        consumerSchedule: options.consumerSchedule ?? "cooperative",
        notifier,
        stages: kernel.constexprs.NUM_STAGES ?? 0,
      },
      "sm_90a",
      { role: "producer", order: order.map, slots: [notify.map], numPidM: ctx.numTiles / ctx.numPidN, numPidN: ctx.numPidN },
    );
    const tables = tablesOf([order, notify]);
    return { kernel: entry, file: { path: entry.source, text: kernel.source }, tables, expect: kernel.expect };
  };
}

/**
 * TLX GEMM+ReduceScatter from a direct ReduceScatter plan after compute and its producer
 * schedule (the inputs of `emitGemmRs`): the TLX producer (`tlxProducerFactory`), then the
 * same deliveries (`options.backend`: copy engine or SM pushes) and reduction.
 * @throws {EmitError} as `emitGemmRs` and `tlxProducerFactory`.
 */
export function emitTlxGemmRs(plan: ChunkPlan, schedule: TileSchedule, options: EmitOptions & TlxProducerOptions = {}): TlxEmitResult {
  if (options.backend === "nvshmem")
    throw new EmitError(
      "unsupported-op",
      'the TLX GEMM+RS is built over copy-engine or SM pushes; emitGemmRs builds options.backend "nvshmem"',
    );
  const { stages, consumerRegisters, consumerSchedule, epilogueSplit, notifier, clusterM, ...emit } = options;
  const knobs = {
    ...(clusterM === undefined ? {} : { clusterM }),
    ...(notifier === undefined ? {} : { notifier }),
    ...(stages === undefined ? {} : { stages }),
    ...(consumerRegisters === undefined ? {} : { consumerRegisters }),
    ...(consumerSchedule === undefined ? {} : { consumerSchedule }),
    ...(epilogueSplit === undefined ? {} : { epilogueSplit }),
  };
  const r = emitGemmRs(plan, schedule, emit, tlxProducerFactory(knobs));
  return { files: r.files, manifest: r.manifest, expect: r.expect ?? {} };
}

/** `tlxBackend`'s realisation of a gemm-rs operator: its transfers, warp-specialisation knobs and notifier applied to {@link emitTlxGemmRs}. */
export async function realiseTlxGemmRs(op: Operator): Promise<EmitResult> {
  const { rest, transfers, knobs } = tlxKnobs(op);
  const notifier = op.warpSpecialization?.notifier;
  const schedule = operatorSchedule(op, partialTensor(op), "producer", true);
  return emitTlxGemmRs(op.plan, schedule, {
    ...rest,
    ...(transfers === undefined ? {} : { backend: transfers }),
    ...knobs,
    ...(notifier === undefined ? {} : { notifier }),
    name: op.name,
  });
}
