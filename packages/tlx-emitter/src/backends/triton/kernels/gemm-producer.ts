// The `gemm-producer` template: a persistent TMA GEMM that stores each tile locally and
// then release-adds the tile-done slot of its m-block (TileLink's producer_tile_notify),
// so communication (copy engine or SM kernels) can move finished rows while it runs.
import {
  checkGemmParams,
  type GemmParams,
  type KernelTemplateInfo,
  kernelModule,
  signature,
  type SourceOptions,
  tlType,
  writeGemmPrologue,
  writeGroupedTileLoop,
  writeKLoop,
} from "./common.js";

/** Argument names and constexprs of `gemm-producer`. */
export const GEMM_PRODUCER: KernelTemplateInfo = {
  kind: "gemm-producer",
  entry: "gemm_producer",
  args: ["a_ptr", "b_ptr", "c_ptr", "order_ptr", "notify_ptr", "sig_ptr", "M", "N", "K"],
  constexprs: ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"],
};

/**
 * Source of the producer kernel `C = A @ B`: tiles in the grouped persistent order over
 * `order_ptr` (m-blocks in the order the plan needs them); each tile is stored locally
 * with ordinary stores, then, when `notify_ptr[pid_m] >= 0`, a barrier and a release add of 1 at
 * system scope to that slot. Local stores keep the epilogue fast (storing whole tiles
 * into a peer from the epilogue was measured slower than not overlapping at all).
 * @throws {EmitError} `bad-param` for a tiling `checkGemmParams` rejects.
 */
export function gemmProducerSource(params: GemmParams, options: SourceOptions = {}): string {
  checkGemmParams(params);
  const out = tlType(options.dtype);
  return kernelModule(
    "gemm-producer: C = A @ B stored locally; each tile then release-adds its m-block's tile-done slot.",
    options.dtype,
    (w) => {
      w.block(signature(GEMM_PRODUCER), (b) => {
        writeGemmPrologue(b, false);
        writeGroupedTileLoop(b, (l) => {
          l.line("offs_bn = pid_n * BLOCK_N");
          writeKLoop(l, "pid_m * BLOCK_M");
          // A TMA store completes asynchronously and a release add does not order it, so
          // the tile is stored with ordinary stores, which the barrier + release do order.
          l.line("rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)");
          l.line("cols = offs_bn + tl.arange(0, BLOCK_N)");
          l.line("mask = (rows[:, None] < M) & (cols[None, :] < N)");
          l.line(`tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(${out}), mask=mask)`);
          l.line("slot = tl.load(notify_ptr + pid_m)");
          l.block("if slot >= 0", (i) => {
            i.line("notify_slot(sig_ptr, slot)");
          });
        });
      });
    },
  );
}
