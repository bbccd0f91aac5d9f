// The `rs-reduce-rows` template: `rs-reduce` for a row count that is a run-time argument. The rank's slab
// (m = M / WORLD rows) is summed over every peer's partial delivered into `partials[WORLD · m, N]` and its own
// partial read in place; block `ovl_m` of the slab waits, per peer `ovl_peer`, on the (at most two) arrival
// slots the operator's maps give. m, the block count and the slots are printed from @ovl/mapping expressions
// of the row count `ovl_rows` (an unspecialised argument): one compiled kernel serves every M.
import { toPython, type Expr } from "@ovl/mapping";
import { EmitError } from "../../../core/writer/index.js";
import { checkBlock, checkPositive, type KernelTemplateInfo, kernelModule, signature, type SourceOptions, tlType } from "./common.js";
import type { Writer } from "./sm-comm.js";

/** Argument names and constexprs of `rs-reduce-rows`. */
export const RS_REDUCE_ROWS: KernelTemplateInfo = {
  kind: "rs-reduce-rows",
  entry: "rs_reduce_rows",
  args: ["part_ptr", "own_ptr", "out_ptr", "sig_ptr", "err_ptr", "N", "rank", "epoch_ptr", "timeout_ns", "ovl_rows"],
  constexprs: ["WORLD", "BLOCK_M", "BLOCK_N"],
};

/** Parameters of `rs-reduce-rows`: the sizes, and the maps over `ovl_rows`, `ovl_m` (the slab's block) and `ovl_peer`. */
export interface RsReduceRowsParams {
  readonly WORLD: number;
  readonly BLOCK_M: number;
  readonly BLOCK_N: number;
  readonly N: number;
  /** Rows per rank, over `ovl_rows`. */
  readonly rowsPerRank: Expr;
  /** Blocks of the slab, over `ovl_rows`. */
  readonly blocks: Expr;
  /** The arrival slots block `ovl_m` waits on for peer `ovl_peer` (-1: none), over those and `ovl_rows`. */
  readonly slots: readonly Expr[];
}

/**
 * Source of `rs_reduce_rows`: a persistent kernel striding over the slab's (block, n-block) tiles; per tile, for
 * p = 0 … WORLD-1 (unrolled), the rows of `partials` at p·m (after waiting, acquire and bounded, on each of the
 * block's slots for peer p reaching the launch's target) or, for p = rank, the rank's own partial rows in place
 * (`own_ptr`, the producer's `[M, N]` output at rows rank·m), summed in fp32 and stored into `out` (`[m, N]`).
 * Rows past m are masked. @throws {EmitError} `bad-param`.
 */
export function rsReduceRowsSource(p: RsReduceRowsParams, options: SourceOptions = {}): string {
  return kernelModule(
    "rs-reduce-rows: out = sum over ranks of this rank's slab of M / WORLD rows, M a run-time argument (ovl_rows).",
    options.dtype,
    (w) =>
      w.block(signature(RS_REDUCE_ROWS), (b) =>
        writeRowsSlabReduce(b, p, options, { store: (l, sum) => l.line(`tl.store(out_ptr + off, ${sum}, mask=mask)`) }),
      ),
  );
}

/** What a kernel built on {@link writeRowsSlabReduce} does besides the reduction. */
export interface RowsSlabReduceParts {
  /** Lines after `rows_per_rank` and the slab's sizes are set, before the loop over its tiles. */
  readonly before?: (w: Writer) => void;
  /** Each tile's sum (`sum`: in the element type; the tile's offsets within a slab are `off`, its mask `mask`). */
  readonly store: (w: Writer, sum: string) => void;
  /** Lines after the loop. */
  readonly after?: (w: Writer) => void;
}

/**
 * The body `rs-reduce-rows` and `ar-reduce-broadcast-rows` share: the slab's sizes from the maps over `ovl_rows`, the
 * persistent loop over its tiles, the waits per peer on the block's arrival slots and the fp32 sum.
 * @throws {EmitError} `bad-param`.
 */
export function writeRowsSlabReduce(w: Writer, p: RsReduceRowsParams, options: SourceOptions, parts: RowsSlabReduceParts): void {
  checkPositive(p.WORLD, "WORLD");
  checkPositive(p.N, "N");
  checkBlock(p.BLOCK_M, "BLOCK_M");
  checkBlock(p.BLOCK_N, "BLOCK_N");
  if (p.slots.length === 0) throw new EmitError("bad-param", "rs-reduce-rows waits on at least one slot per block and peer");
  const dtype = tlType(options.dtype);
  const py = (e: Expr) => toPython(e, { dialect: "triton" });
  w.line(`rows_per_rank = ${py(p.rowsPerRank)}`);
  w.line(`blocks = ${py(p.blocks)}`);
  w.line("target = load_epoch_target(epoch_ptr, 1)");
  w.line("num_pn = tl.cdiv(N, BLOCK_N)");
  parts.before?.(w);
  w.block("for t in range(tl.program_id(0), blocks * num_pn, tl.num_programs(0))", (body) => {
    body.line("ovl_m = t // num_pn");
    body.line("pn = t % num_pn");
    body.line("rows = ovl_m * BLOCK_M + tl.arange(0, BLOCK_M)");
    body.line("cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)");
    body.line("mask = (rows[:, None] < rows_per_rank) & (cols[None, :] < N)");
    body.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)");
    body.line("off = rows[:, None] * N + cols[None, :]");
    body.block("for ovl_peer in tl.static_range(WORLD)", (l) => {
      l.line("slab_off = ovl_peer * rows_per_rank * N");
      l.line("src = part_ptr");
      l.block("if ovl_peer == rank", (own) => own.line("src = own_ptr"));
      l.block("else", (peer) => {
        p.slots.forEach((slot, j) => {
          peer.line(`slot${j} = ${py(slot)}`);
          peer.block(`if slot${j} >= 0`, (x) => {
            x.line(`tok = wait_slot(sig_ptr, slot${j}, target, err_ptr, rank, timeout_ns)`);
            x.line("slab_off = consume_token(slab_off, tok)");
          });
        });
      });
      // Each slab starts p·m·N elements in: 16-byte aligned when a row is (the operator checks N).
      l.line("slab = tl.multiple_of(src + slab_off, 16)");
      l.line("acc += tl.load(slab + off, mask=mask).to(tl.float32)");
    });
    parts.store(body, `acc.to(${dtype})`);
  });
  parts.after?.(w);
}
