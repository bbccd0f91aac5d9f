// What a GEMM+RS producer kernel is built from (the template's, or a transformed local body's):
// per rank its m-block order and notify slots, the tiling and launch, and the buffers it writes.
import type { EmittedFile } from "../../core/result.js";
import type { Kernel, Table } from "../../core/manifest/schema.js";
import { kernelEntry, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { GEMM_PRODUCER, type GemmParams, gemmProducerSource, type LaunchOptions } from "../../backends/triton/kernels/index.js";
import type { ResolvedOptions } from "../../core/options.js";

/** What a GEMM+RS producer kernel is built from: per rank its m-block order and per m-block notify slot. */
export interface ProducerContext {
  /** `order[rank]`: m-blocks in computing order (sending order, own slab last). */
  readonly order: readonly (readonly number[])[];
  /** `notify[rank][m]`: the tile-done slot every tile of m-block m notifies (-1 = none). */
  readonly notify: readonly (readonly number[])[];
  readonly params: GemmParams;
  readonly launch: LaunchOptions;
  /** SMs the producer's persistent grid leaves to a communication kernel. */
  readonly reserve: { readonly reserve?: number };
  readonly numTiles: number;
  readonly numPidN: number;
  /** Buffer names: the partial product, A and B. */
  readonly partial: string;
  readonly a: string;
  readonly b: string;
  readonly options: ResolvedOptions;
  /**
   * Scope of the producer's notifies (default `sys`): `gpu` only when the tile-done slots are
   * written by this producer alone and waited on only by kernels of the same device.
   */
  readonly notifyScope?: "gpu" | "sys";
  /** `notifyTile[rank][t]`: the slot tile `t = m · numPidN + n` notifies, where tiles of one m-block differ (tile-wise AllReduce); default `notify` per m-block. */
  readonly notifyTile?: readonly (readonly number[])[];
  /** The operator the producer serves (`template.params.operator`; default `gemm-rs`). */
  readonly operator?: "gemm-rs" | "gemm-ar";
}

/** A producer kernel in place of the `gemm-producer` template (a transformed local body). */
export type ProducerFactory = (ctx: ProducerContext) => {
  kernel: Kernel;
  file: EmittedFile;
  tables: Table[];
  /** A precompiled producer's PTX expectations (the AOT check). */
  expect?: readonly string[];
};

/**
 * The producer of a GEMM+RS template for `ctx`: `producer`'s kernel (a transformed local body) or the built-in
 * `gemm_producer` over the `mblock_order` and `mblock_notify_slot` tables, either one's tables put first in
 * `tables`; its source file; and a precompiled producer's PTX expectations by kernel name, if any.
 */
export function rsProducer(
  ctx: ProducerContext,
  producer: ProducerFactory | undefined,
  tables: Table[],
): { kernel: Kernel; file: EmittedFile; expect?: Record<string, readonly string[]> } {
  const made = producer?.(ctx);
  const { params, options: o } = ctx;
  if (made === undefined) {
    tables.unshift(
      { name: "mblock_order", dtype: "int32", values: ctx.order.map((r) => [...r]) },
      { name: "mblock_notify_slot", dtype: "int32", values: ctx.notify.map((r) => [...r]) },
    );
  } else {
    tables.unshift(...made.tables);
  }
  const kernel =
    made?.kernel ??
    kernelEntry(GEMM_PRODUCER, {
      name: "gemm_producer",
      stream: "compute",
      grid: [{ kind: "num-sms", cap: ctx.numTiles, ...ctx.reserve }],
      ...ctx.launch,
      args: {
        a_ptr: { kind: "buffer", name: ctx.a },
        b_ptr: { kind: "buffer", name: ctx.b },
        c_ptr: { kind: "buffer", name: ctx.partial },
        order_ptr: { kind: "table", name: "mblock_order" },
        notify_ptr: { kind: "table", name: "mblock_notify_slot" },
        sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
        M: { kind: "int", value: params.M },
        N: { kind: "int", value: params.N },
        K: { kind: "int", value: params.K },
      },
      constexprs: { BLOCK_M: params.BLOCK_M, BLOCK_N: params.BLOCK_N, BLOCK_K: params.BLOCK_K, GROUP_M: params.GROUP_M },
      params: { ...params },
    });
  const file = made?.file ?? { path: "gemm_producer.py", text: gemmProducerSource(params, { dtype: o.dtype }) };
  return { kernel, file, ...(made?.expect === undefined ? {} : { expect: { [made.kernel.name]: made.expect } }) };
}
