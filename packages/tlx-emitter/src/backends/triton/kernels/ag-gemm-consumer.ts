// The `ag-gemm-consumer` template: a persistent TMA GEMM over the gathered A that visits
// m-blocks in the schedule's order and, per tile, waits on the chunk slot its rows
// arrive with (AutoOverlap §5.2's consumer; TileLink's consumer_tile_wait).
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

/** Argument names and constexprs of `ag-gemm-consumer`, as the manifest lists them. */
export const AG_GEMM_CONSUMER: KernelTemplateInfo = {
  kind: "ag-gemm-consumer",
  entry: "ag_gemm_consumer",
  args: ["a_ptr", "b_ptr", "c_ptr", "order_ptr", "slot_ptr", "sig_ptr", "err_ptr", "M", "N", "K", "rank", "target", "timeout_ns"],
  constexprs: ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"],
};

/**
 * Source of the consumer kernel `C[M,N] = A[M,K] @ B[K,N]`. Persistent over `tile_id`
 * (grid = number of programs), grouped by `GROUP_M` over the visit index,
 * `pid_m = order[visit_m]`. Before its K loop a tile whose `slot_ptr[pid_m] >= 0` waits
 * (acquire, bounded) until that slot reaches `target` = epoch × 1, and threads the token
 * into the row offset of its A loads. `-1` marks local rows: no wait.
 * @throws {EmitError} `bad-param` for a tiling `checkGemmParams` rejects.
 */
export function agGemmConsumerSource(params: GemmParams, options: SourceOptions = {}): string {
  checkGemmParams(params);
  const out = tlType(options.dtype);
  return kernelModule(
    `ag-gemm-consumer: C = A @ B over the gathered A, waiting per tile on the chunk slot of its rows.`,
    options.dtype,
    (w) => {
      w.block(signature(AG_GEMM_CONSUMER), (b) => {
        writeGemmPrologue(b, true);
        writeGroupedTileLoop(b, (l) => {
          l.line("offs_am = pid_m * BLOCK_M");
          l.line("slot = tl.load(slot_ptr + pid_m)");
          l.block("if slot >= 0", (i) => {
            i.line("tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)");
            i.line("offs_am = consume_token(offs_am, tok)");
          });
          l.line("offs_bn = pid_n * BLOCK_N");
          writeKLoop(l, "offs_am");
          l.line(`c_desc.store([pid_m * BLOCK_M, offs_bn], acc.to(${out}))`);
        });
      });
    },
  );
}
