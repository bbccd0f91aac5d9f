// The `rs-reduce` template: this rank's slab of a ReduceScatter, summed over the partial
// slabs every rank delivered into its symmetric `partials[WORLD, rows_per_rank, N]`,
// waiting per (source rank, m-block) on the slot its table says that delivery signalled.
import { EmitError } from "../writer/index.js";
import { checkBlock, checkPositive, type KernelTemplateInfo, kernelModule, signature, type SourceOptions, tlType } from "./common.js";

/** Argument names and constexprs of `rs-reduce`. */
export const RS_REDUCE: KernelTemplateInfo = {
  kind: "rs-reduce",
  entry: "rs_reduce",
  args: ["part_ptr", "out_ptr", "sig_ptr", "slot_ptr", "err_ptr", "N", "rank", "target", "timeout_ns", "rows_per_rank"],
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

/**
 * Grid of `rs-reduce`: a persistent 1-D grid of at most `programs` programs (default 64)
 * striding over the slab's (m-block, n-block) tiles. Bounded on purpose: its programs spin
 * until deliveries arrive, and a grid that filled every SM would starve whatever delivers
 * the data (a copy the driver runs as a kernel, or an SM communication kernel).
 */
export function rsReduceGrid(p: RsReduceParams, programs = 64): [number] {
  checkPositive(programs, "reduce programs");
  const tiles = (p.rows_per_rank / p.BLOCK_M) * Math.ceil(p.N / p.BLOCK_N);
  return [Math.min(programs, tiles)];
}

/**
 * Source of `rs_reduce`: a persistent kernel whose programs stride over the slab's tiles in
 * m-block-major order (the order deliveries arrive); tile `(mb, pn)` accumulates in fp32, for `p = 0 .. WORLD-1`,
 * `partials[p, mb·BLOCK_M.., pn·BLOCK_N..]` after waiting (acquire, bounded) on slot
 * `slot_ptr[p · (rows_per_rank / BLOCK_M) + mb]` reaching `target` (epoch × notifies per
 * slot). The table (int32, `WORLD · rows_per_rank / BLOCK_M` entries per rank) lets one
 * signal cover a whole delivered chunk of several m-blocks. The load offsets carry the
 * wait's token. Then it stores the sum into `out`.
 * @throws {EmitError} `bad-param`.
 */
export function rsReduceSource(params: RsReduceParams, options: SourceOptions = {}): string {
  checkRsReduceParams(params);
  const out = tlType(options.dtype);
  return kernelModule("rs-reduce: out = sum over ranks of the partial slabs delivered here, waiting per (rank, m-block).", options.dtype, (w) => {
    w.block(signature(RS_REDUCE), (b) => {
      b.line("blocks_per_slab = rows_per_rank // BLOCK_M");
      b.line("num_pn = tl.cdiv(N, BLOCK_N)");
      b.block("for t in range(tl.program_id(0), blocks_per_slab * num_pn, tl.num_programs(0))", (body) => {
        body.line("mb = t // num_pn");
        body.line("pn = t % num_pn");
        body.line("rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)");
        body.line("cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)");
        body.line("mask = cols[None, :] < N");
        body.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)");
        body.block("for p in range(WORLD)", (l) => {
          l.line("off = rows[:, None] * N + cols[None, :]");
          l.line("slot = tl.load(slot_ptr + p * blocks_per_slab + mb)");
          l.line("tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)");
          // The token rides on the scalar slab base, not on the offset tile: an opaque
          // offset tile would hide its contiguity and turn the loads into scalar loads.
          l.line("base = tl.multiple_of(consume_token(p * rows_per_rank * N, tok), 16)");
          l.line("acc += tl.load(part_ptr + base + off, mask=mask).to(tl.float32)");
        });
        body.line(`tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(${out}), mask=mask)`);
      });
    });
  });
}
