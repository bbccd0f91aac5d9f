// The `ar-reduce` template: the ReduceScatter half of a partitioned AllReduce (GEMM+AR).
// As `rs-reduce`, it sums the partial slabs delivered into this rank's `partials`, but it
// stores the sum at the rank's own rows of the full output and notifies, per finished tile,
// the m-block's `reduced` slot, so the AllGather half can send rows as they are reduced.
import { type KernelTemplateInfo, kernelModule, signature, type SourceOptions } from "./common.js";
import { checkRsReduceParams, type RsReduceParams, writeSlabReduce } from "./rs-reduce.js";

/** Argument names and constexprs of `ar-reduce` (those of `rs-reduce`, then `done_base`). */
export const AR_REDUCE: KernelTemplateInfo = {
  kind: "ar-reduce",
  entry: "ar_reduce",
  args: [
    "part_ptr",
    "own_ptr",
    "out_ptr",
    "sig_ptr",
    "slot_ptr",
    "err_ptr",
    "N",
    "rank",
    "epoch_ptr",
    "timeout_ns",
    "rows_per_rank",
    "done_base",
  ],
  constexprs: ["WORLD", "BLOCK_M", "BLOCK_N"],
};

/**
 * Source of `ar_reduce`: `rs_reduce`'s loop over this rank's slab (`rows_per_rank` rows; its own
 * partial read in place from `own_ptr`),
 * storing each summed tile `(mb, pn)` into `out` (the full `[WORLD · rows_per_rank, N]`
 * output) at rows `rank · rows_per_rank + mb · BLOCK_M ..`, then release-adding 1 to slot
 * `done_base + mb` (`notify_slot`): that slot reaches `epoch × cdiv(N, BLOCK_N)` once the
 * m-block's rows are reduced on this launch.
 * @throws {EmitError} `bad-param`.
 */
export function arReduceSource(params: RsReduceParams, options: SourceOptions = {}): string {
  checkRsReduceParams(params);
  return kernelModule(
    "ar-reduce: this rank's rows of the output = sum over ranks of the delivered partial slabs; notify per reduced tile.",
    options.dtype,
    (w) =>
      w.block(signature(AR_REDUCE), (b) => {
        b.line("out_base = out_ptr + rank * rows_per_rank * N");
        writeSlabReduce(b, options, "out_base", (l) => l.line("notify_slot(sig_ptr, done_base + mb)"));
      }),
  );
}
