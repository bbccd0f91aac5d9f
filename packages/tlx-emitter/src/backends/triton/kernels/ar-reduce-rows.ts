// The `ar-reduce-broadcast-rows` template: `ar-reduce-broadcast` for a row count that is a run-time argument
// (`ovl_rows`). It reduces this rank's slab as `rs-reduce-rows` does, stores each summed tile at the slab's rows
// (rank·m …) of every rank's output (the AllGather half as peer stores), and then notifies every peer once per
// program with the tiles it stored (slot `recv_base + rank` there).
import { AR_REDUCE_BROADCAST } from "./ar-reduce.js";
import { type KernelTemplateInfo, kernelModule, signature, type SourceOptions } from "./common.js";
import { RS_REDUCE_ROWS, type RsReduceRowsParams, writeRowsSlabReduce } from "./rs-reduce-rows.js";

/** Argument names and constexprs of `ar-reduce-broadcast-rows`. */
export const AR_REDUCE_BROADCAST_ROWS: KernelTemplateInfo = {
  kind: "ar-reduce-broadcast-rows",
  entry: "ar_reduce_broadcast_rows",
  args: [
    ...RS_REDUCE_ROWS.args.flatMap((a) => (a === "out_ptr" ? ["out_ptrs"] : a === "sig_ptr" ? ["sig_ptr", "sig_ptrs"] : [a])),
    "recv_base",
  ],
  constexprs: AR_REDUCE_BROADCAST.constexprs,
};

/** Source of `ar_reduce_broadcast_rows` (see the module comment). @throws {EmitError} `bad-param`. */
export function arReduceBroadcastRowsSource(p: RsReduceRowsParams, options: SourceOptions = {}): string {
  return kernelModule(
    "ar-reduce-broadcast-rows: this rank's rows of every rank's output = sum over ranks of its slab of M / WORLD rows, M a run-time argument (ovl_rows); notify every peer once per program.",
    options.dtype,
    (w) =>
      w.block(signature(AR_REDUCE_BROADCAST_ROWS), (b) =>
        writeRowsSlabReduce(b, p, options, {
          before: (l) => {
            l.line("slab_rows = rank * rows_per_rank * N");
            l.line("stored = rank * 0");
          },
          store: (l, sum) => {
            l.line(`total = ${sum}`);
            l.block("for p in tl.static_range(WORLD)", (s) => {
              s.line("dst = tl.multiple_of(peer_base(out_ptrs, p, own_ptr) + slab_rows, 16)");
              s.line("tl.store(dst + off, total, mask=mask)");
            });
            l.line("stored += 1");
          },
          after: (l) =>
            l.block("for p in tl.static_range(WORLD)", (s) =>
              s.block("if p != rank", (i) => i.line("peer_notify(sig_ptrs, p, recv_base + rank, stored)")),
            ),
        }),
      ),
  );
}
