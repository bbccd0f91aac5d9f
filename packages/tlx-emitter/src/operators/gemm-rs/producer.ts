// What a GEMM+RS producer kernel is built from (the template's, or a transformed local body's):
// per rank its m-block order and notify slots, the tiling and launch, and the buffers it writes.
import type { EmittedFile } from "../../core/result.js";
import type { Kernel, Table } from "../../core/manifest/schema.js";
import type { GemmParams, LaunchOptions } from "../../backends/triton/kernels/index.js";
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
