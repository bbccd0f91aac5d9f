// The `ar-reduce` template: the ReduceScatter half of a partitioned AllReduce (GEMM+AR).
// As `rs-reduce`, it sums the partial slabs delivered into this rank's `partials`, but it
// stores the sum at the rank's own rows of the full output and notifies, per finished tile,
// the m-block's `reduced` slot, so the AllGather half can send rows as they are reduced.
// `ar-reduce-broadcast` is both halves in one kernel: it stores each summed tile into every
// rank's output itself (the AllGather as peer stores) and notifies each peer.
import { type KernelTemplateInfo, kernelModule, signature, type SourceOptions } from "./common.js";
import { checkRsReduceParams, RS_REDUCE, type RsReduceParams, writeSlabReduce } from "./rs-reduce.js";

/** Argument names and constexprs of `ar-reduce` (those of `rs-reduce`, then `done_base`). */
export const AR_REDUCE: KernelTemplateInfo = {
  kind: "ar-reduce",
  entry: "ar_reduce",
  args: [...RS_REDUCE.args, "done_base"],
  constexprs: RS_REDUCE.constexprs,
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
        writeSlabReduce(b, options, (l, sum) => {
          l.line(`tl.store(out_base + off, ${sum}, mask=mask)`);
          l.line("notify_slot(sig_ptr, done_base + mb)");
        });
      }),
  );
}

/**
 * Argument names and constexprs of `ar-reduce-broadcast`: those of `rs-reduce` with the output's
 * peer-pointers table `out_ptrs` for `out_ptr` and the signals' `sig_ptrs` after `sig_ptr`, then `recv_base`.
 */
export const AR_REDUCE_BROADCAST: KernelTemplateInfo = {
  kind: "ar-reduce-broadcast",
  entry: "ar_reduce_broadcast",
  args: [...RS_REDUCE.args.flatMap((a) => (a === "out_ptr" ? ["out_ptrs"] : a === "sig_ptr" ? ["sig_ptr", "sig_ptrs"] : [a])), "recv_base"],
  constexprs: RS_REDUCE.constexprs,
};

/**
 * Source of `ar_reduce_broadcast`: `rs_reduce`'s loop over this rank's slab (its own partial read in
 * place from `own_ptr`), storing each summed tile `(mb, pn)` at rows `rank · rows_per_rank + mb · BLOCK_M ..`
 * of every rank's output (`out_ptrs`, the symmetric `[WORLD · rows_per_rank, N]` output's peer-pointers
 * table, this rank's own included). A program counts its tiles and, after its last, release-adds that
 * count to slot `recv_base + rank` of every peer (`peer_notify`): on rank `p`, slot `recv_base + q`
 * reaches `epoch × (rows_per_rank / BLOCK_M) · cdiv(N, BLOCK_N)` once rank `q`'s whole slab is in `p`'s
 * output on this launch. One release per program and peer, not per tile: a system-scope release waits
 * for the program's stores to reach the peers, which per tile would drain the stores in flight over
 * NVLink after every tile. The reduction and the AllGather are one pass over the slab, on every SM the
 * GEMM has left.
 * @throws {EmitError} `bad-param`.
 */
export function arReduceBroadcastSource(params: RsReduceParams, options: SourceOptions = {}): string {
  checkRsReduceParams(params);
  return kernelModule(
    "ar-reduce-broadcast: this rank's rows of every rank's output = sum over ranks of the delivered partial slabs; notify every peer once per program.",
    options.dtype,
    (w) =>
      w.block(signature(AR_REDUCE_BROADCAST), (b) => {
        b.line("slab_rows = rank * rows_per_rank * N");
        b.line("stored = rank * 0");
        writeSlabReduce(b, options, (l, sum) => {
          l.line(`total = ${sum}`);
          l.block("for p in tl.static_range(WORLD)", (s) => {
            s.line("dst = tl.multiple_of(peer_base(out_ptrs, p, own_ptr) + slab_rows, 16)");
            s.line("tl.store(dst + off, total, mask=mask)");
          });
          l.line("stored += 1");
        });
        b.block("for p in tl.static_range(WORLD)", (s) =>
          s.block("if p != rank", (i) => i.line("peer_notify(sig_ptrs, p, recv_base + rank, stored)")),
        );
      }),
  );
}
