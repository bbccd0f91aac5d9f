// The `rs-reduce` template: this rank's slab of a ReduceScatter, summed over the partial
// slabs every peer delivered into its symmetric `partials[WORLD, rows_per_rank, N]`,
// waiting per (source rank, m-block) on the slot its table says that delivery signalled,
// and over its own partial, read in place from the producer's output.
import type { GridDim } from "../../../core/manifest/schema.js";
import { EmitError } from "../../../core/writer/index.js";
import { checkBlock, checkPositive, type KernelTemplateInfo, kernelModule, signature, type SourceOptions, tlType } from "./common.js";
import type { Writer } from "./sm-comm.js";

/** Argument names and constexprs of `rs-reduce`. */
export const RS_REDUCE: KernelTemplateInfo = {
  kind: "rs-reduce",
  entry: "rs_reduce",
  args: ["part_ptr", "own_ptr", "out_ptr", "sig_ptr", "slot_ptr", "err_ptr", "N", "rank", "epoch_ptr", "timeout_ns", "rows_per_rank"],
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

/**
 * Elements of one `rs-reduce` tile by default: 128×128, the tile its one-program-per-SM grid was
 * measured with (an fp32 accumulator of 128 values per thread at 4 warps, `diag_rs_reduce.py`).
 */
export const RS_REDUCE_TILE_ELEMENTS = 128 * 128;

/**
 * The default `BLOCK_N` of a reduction whose `BLOCK_M` is the GEMM's m-block (one arrival slot
 * per m-block): 128, narrowed so that a tile holds at most `RS_REDUCE_TILE_ELEMENTS` — 64 under
 * a 256-row m-block. A 256×128 tile holds 256 fp32 sums per thread at 4 warps, twice the measured one: on two H200s the reduction
 * after the TLX GEMM+RS producer (256×128 tiles) took 0.44 ms at MLP-5 against 0.12 ms after the
 * Triton one's 128-row m-blocks (evidence: `results/runs/h200x2-2026-11-28`).
 * @throws {EmitError} `bad-param` when `blockM` is not a power of two.
 */
export function rsReduceBlockN(blockM: number): number {
  checkBlock(blockM, "BLOCK_M");
  return Math.min(128, Math.max(16, RS_REDUCE_TILE_ELEMENTS / blockM));
}

/** Checks `rs-reduce` parameters: `rows_per_rank` a multiple of `BLOCK_M` (one slot per m-block). */
export function checkRsReduceParams(p: RsReduceParams): RsReduceParams {
  checkPositive(p.WORLD, "WORLD");
  checkPositive(p.N, "N");
  checkPositive(p.rows_per_rank, "rows_per_rank");
  checkBlock(p.BLOCK_M, "BLOCK_M");
  checkBlock(p.BLOCK_N, "BLOCK_N");
  if (p.rows_per_rank % p.BLOCK_M !== 0) {
    throw new EmitError(
      "bad-param",
      `rows_per_rank (${p.rows_per_rank}) must be a multiple of BLOCK_M (${p.BLOCK_M}): each m-block has one arrival slot`,
    );
  }
  return p;
}

/**
 * Grid of `rs-reduce`: a persistent 1-D grid striding over the slab's (m-block, n-block)
 * tiles; by default one program per SM (`num-sms`, capped at the tile count), else at most
 * `programs`. Measured on an H100 (MLP-1/2 slabs at worlds 2 and 4, H = 8192 at world 2,
 * `packages/bench/gpu/diag/diag_rs_reduce.py`): with vectorised loads one program per SM is within ~10% of one
 * per tile, and 64 programs lose ~1.3×. Bounded on purpose: its programs spin until
 * deliveries arrive, and a grid that filled every SM's registers (two programs per SM
 * already do) starves whatever delivers the data: the driver runs a copy within one
 * device (the rank's own partial) as a kernel, and an SM communication kernel needs SMs too.
 */
export function rsReduceGrid(p: RsReduceParams, programs?: number): [GridDim] {
  const tiles = (p.rows_per_rank / p.BLOCK_M) * Math.ceil(p.N / p.BLOCK_N);
  if (programs === undefined) return [{ kind: "num-sms", cap: tiles }];
  checkPositive(programs, "reduce programs");
  return [Math.min(programs, tiles)];
}

/**
 * Source of `rs_reduce`: a persistent kernel whose programs stride over the slab's tiles in
 * m-block-major order (the order deliveries arrive); tile `(mb, pn)` accumulates in fp32, for `p = 0 .. WORLD-1`
 * (unrolled, so the ranks' loads are in flight together), `partials[p, mb·BLOCK_M.., pn·BLOCK_N..]`
 * after waiting (acquire, bounded) on slot `slot_ptr[p · (rows_per_rank / BLOCK_M) + mb]`
 * reaching the launch's target (one notify per slot per launch, read from the epoch word `epoch_ptr`),
 * and for `p = rank` the rank's own partial rows in place: `own_ptr` (the producer's whole `[WORLD ·
 * rows_per_rank, N]` output, finished before this kernel on the same stream) at the slab's rows, with
 * no wait and no delivery (a copy within the GPU runs as a kernel, which would wait for SMs on the
 * launch's tail). The table (int32, `WORLD · rows_per_rank / BLOCK_M` entries per rank; the rank's
 * own entries -1) lets one signal cover a whole delivered chunk of several
 * m-blocks. The slab's base pointer carries the wait's token and a 16-byte alignment hint
 * (each slab starts `p · rows_per_rank · N` elements in, a multiple of 8 since `BLOCK_M`
 * is): without the hint on the pointer the loads compile to scalar 16-bit loads, ~8× slower.
 * Then it stores the sum into `out`.
 * @throws {EmitError} `bad-param`.
 */
export function rsReduceSource(params: RsReduceParams, options: SourceOptions = {}): string {
  checkRsReduceParams(params);
  return kernelModule(
    "rs-reduce: out = sum over ranks of the partial slabs delivered here, waiting per (rank, m-block).",
    options.dtype,
    (w) =>
      w.block(signature(RS_REDUCE), (b) => writeSlabReduce(b, options, (l, sum) => l.line(`tl.store(out_ptr + off, ${sum}, mask=mask)`))),
  );
}

/**
 * The body `rs-reduce`, `ar-reduce` and `ar-reduce-broadcast` share: the persistent loop over the
 * slab's tiles, the per-(rank, m-block) waits and the fp32 sum; `store(w, sum)` writes what each
 * tile does with its sum (`sum`: the expression of it in the element type; the tile's offsets are
 * `off` within a slab, its mask `mask`), its stores and what follows them (a notify).
 */
export function writeSlabReduce(w: Writer, options: SourceOptions, store: (w: Writer, sum: string) => void): void {
  const dtype = tlType(options.dtype);
  w.line("blocks_per_slab = rows_per_rank // BLOCK_M");
  w.line("target = load_epoch_target(epoch_ptr, 1)");
  w.line("num_pn = tl.cdiv(N, BLOCK_N)");
  w.block("for t in range(tl.program_id(0), blocks_per_slab * num_pn, tl.num_programs(0))", (body) => {
    body.line("mb = t // num_pn");
    body.line("pn = t % num_pn");
    body.line("rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)");
    body.line("cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)");
    body.line("mask = cols[None, :] < N");
    body.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)");
    body.line("off = rows[:, None] * N + cols[None, :]");
    body.block("for p in tl.static_range(WORLD)", (l) => {
      l.line("slab_off = p * rows_per_rank * N");
      l.line("src = part_ptr");
      l.block("if p == rank", (own) => own.line("src = own_ptr"));
      l.block("else", (peer) => {
        peer.line("slot = tl.load(slot_ptr + p * blocks_per_slab + mb)");
        peer.line("tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)");
        peer.line("slab_off = consume_token(slab_off, tok)");
      });
      // The token rides on the slab's base pointer, and the alignment hint goes on that
      // pointer: Triton drops a hint on an opaque integer, and the loads turn scalar.
      l.line("slab = tl.multiple_of(src + slab_off, 16)");
      l.line("acc += tl.load(slab + off, mask=mask).to(tl.float32)");
    });
    store(body, `acc.to(${dtype})`);
  });
}
