// The `rs-reduce` template: this rank's slab of a ReduceScatter, summed over the partial
// slabs every rank delivered into its symmetric `partials[WORLD, rows_per_rank, N]`,
// waiting per (source rank, m-block) on the slot the delivery signalled.
import { EmitError } from "../writer/index.js";
import { checkBlock, checkPositive, type KernelTemplateInfo, kernelModule, signature, type SourceOptions, tlType } from "./common.js";

/** Argument names and constexprs of `rs-reduce`. */
export const RS_REDUCE: KernelTemplateInfo = {
  kind: "rs-reduce",
  entry: "rs_reduce",
  args: ["part_ptr", "out_ptr", "sig_ptr", "err_ptr", "N", "rank", "target", "timeout_ns", "rows_per_rank"],
  constexprs: ["WORLD", "BLOCK_M", "BLOCK_N"],
};

/** Parameters of `rs-reduce`. */
export interface RsReduceParams {
  readonly WORLD: number;
  readonly BLOCK_M: number;
  readonly BLOCK_N: number;
  readonly N: number;
  readonly rows_per_rank: number;
}

/** Checks `rs-reduce` parameters: `rows_per_rank` a multiple of `BLOCK_M` (one slot per m-block). */
export function checkRsReduceParams(p: RsReduceParams): RsReduceParams {
  checkPositive(p.WORLD, "WORLD");
  checkPositive(p.N, "N");
  checkPositive(p.rows_per_rank, "rows_per_rank");
  checkBlock(p.BLOCK_M, "BLOCK_M");
  checkBlock(p.BLOCK_N, "BLOCK_N");
  if (p.rows_per_rank % p.BLOCK_M !== 0) {
    throw new EmitError("bad-param", `rows_per_rank (${p.rows_per_rank}) must be a multiple of BLOCK_M (${p.BLOCK_M}): each m-block has one arrival slot`);
  }
  return p;
}

/** Grid of `rs-reduce`: one program per (m-block of the slab, n-block). */
export function rsReduceGrid(p: RsReduceParams): [number, number] {
  return [p.rows_per_rank / p.BLOCK_M, Math.ceil(p.N / p.BLOCK_N)];
}

/**
 * Source of `rs_reduce`: program `(mb, pn)` accumulates in fp32, for `p = 0 .. WORLD-1`,
 * `partials[p, mb·BLOCK_M.., pn·BLOCK_N..]` after waiting (acquire, bounded) on slot
 * `p · (rows_per_rank / BLOCK_M) + mb` reaching `target` (epoch × notifies per slot);
 * the load offsets carry the wait's token. Then it stores the sum into `out`.
 * @throws {EmitError} `bad-param`.
 */
export function rsReduceSource(params: RsReduceParams, options: SourceOptions = {}): string {
  checkRsReduceParams(params);
  const out = tlType(options.dtype);
  return kernelModule("rs-reduce: out = sum over ranks of the partial slabs delivered here, waiting per (rank, m-block).", options.dtype, (w) => {
    w.block(signature(RS_REDUCE), (b) => {
      b.line("mb = tl.program_id(0)");
      b.line("pn = tl.program_id(1)");
      b.line("blocks_per_slab = rows_per_rank // BLOCK_M");
      b.line("rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)");
      b.line("cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)");
      b.line("mask = cols[None, :] < N");
      b.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)");
      b.block("for p in range(WORLD)", (l) => {
        l.line("off = rows[:, None] * N + cols[None, :]");
        l.line("tok = wait_slot(sig_ptr, p * blocks_per_slab + mb, target, err_ptr, rank, timeout_ns)");
        l.line("off = consume_token(off, tok)");
        l.line("acc += tl.load(part_ptr + p * rows_per_rank * N + off, mask=mask).to(tl.float32)");
      });
      b.line(`tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(${out}), mask=mask)`);
    });
  });
}
