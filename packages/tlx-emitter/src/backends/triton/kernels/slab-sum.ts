// The `slab-sum` template: a reduction over a list of m-blocks, each the sum of `CONTRIB`
// contributions: the rank's own rows read in place, or a contributor's rows delivered into a
// staging buffer (waiting, bounded, on the slot that delivery signalled). Each summed tile is
// stored at the m-block's place in a compact output and, when `done_base >= 0`, release-adds 1
// to the m-block's done slot, so a later stage can send the sum on. The two stages of the
// hierarchical GEMM+ReduceScatter are two launches of it: the node sums of a rank's rail, then
// its own slab over the nodes.
import type { GridDim } from "../../../core/manifest/schema.js";
import { EmitError } from "../../../core/writer/index.js";
import { checkBlock, checkPositive, type KernelTemplateInfo, kernelModule, signature, type SourceOptions, tlType } from "./common.js";

/** Argument names and constexprs of `slab-sum`. */
export const SLAB_SUM: KernelTemplateInfo = {
  kind: "slab-sum",
  entry: "slab_sum",
  args: [
    "part_ptr",
    "own_ptr",
    "out_ptr",
    "sig_ptr",
    "slot_ptr",
    "block_ptr",
    "err_ptr",
    "N",
    "rank",
    "epoch_ptr",
    "timeout_ns",
    "blocks",
    "done_base",
  ],
  constexprs: ["CONTRIB", "BLOCK_M", "BLOCK_N"],
};

/** Parameters of `slab-sum`: contributions per m-block, the tile, the columns and the m-blocks per rank. */
export interface SlabSumParams {
  readonly CONTRIB: number;
  readonly BLOCK_M: number;
  readonly BLOCK_N: number;
  readonly N: number;
  readonly blocks: number;
}

/** Checks `slab-sum` parameters. @throws {EmitError} `bad-param`. */
export function checkSlabSumParams(p: SlabSumParams): SlabSumParams {
  checkPositive(p.CONTRIB, "CONTRIB");
  checkPositive(p.N, "N");
  checkPositive(p.blocks, "blocks");
  checkBlock(p.BLOCK_M, "BLOCK_M");
  checkBlock(p.BLOCK_N, "BLOCK_N");
  if (p.CONTRIB < 2) throw new EmitError("bad-param", `CONTRIB (${p.CONTRIB}) must be 2 or more: a sum of one contribution moves nothing`);
  return p;
}

/**
 * Grid of `slab-sum`: one program per SM the communication kernel leaves (`reserve`), capped at
 * the tiles. Its programs spin on deliveries, and the NVSHMEM push kernel that makes them (and
 * sends the sums on) must keep its SMs.
 */
export function slabSumGrid(p: SlabSumParams, reserve: number): [GridDim] {
  return [{ kind: "num-sms", cap: p.blocks * Math.ceil(p.N / p.BLOCK_N), reserve }];
}

/**
 * Source of `slab_sum`. Programs stride over the `blocks · cdiv(N, BLOCK_N)` tiles `(i, pn)` in
 * m-block-major order; tile `(i, pn)` accumulates in fp32, for `k = 0 .. CONTRIB-1` (unrolled),
 * contribution k of m-block i: with `slot = slot_ptr[k · blocks + i]` negative, the rank's own rows
 * in place, `own_ptr` at m-block `block_ptr[i]` (no wait: the kernel that wrote them ran before on
 * the same stream); else, after waiting (acquire, bounded, named) for the slot to reach the launch's
 * target (one signal per slot per launch), the staged rows at `part_ptr[(k · blocks + i) · BLOCK_M ..]`.
 * The sum is stored at rows `i · BLOCK_M ..` of `out_ptr`; with `done_base >= 0`, `notify_slot`
 * then release-adds 1 to slot `done_base + i`, which reaches `epoch × cdiv(N, BLOCK_N)` once the
 * m-block is summed on this launch. Bases carry a 16-byte alignment hint (whole m-blocks of `N`
 * columns: 16-byte vector loads and stores).
 * @throws {EmitError} `bad-param`.
 */
export function slabSumSource(params: SlabSumParams, options: SourceOptions = {}): string {
  checkSlabSumParams(params);
  const dtype = tlType(options.dtype);
  return kernelModule(
    "slab-sum: per listed m-block, the sum of its contributions (own rows in place, staged rows after their signal); notify per summed tile.",
    options.dtype,
    (w) =>
      w.block(signature(SLAB_SUM), (b) => {
        b.line("target = load_epoch_target(epoch_ptr, 1)");
        b.line("num_pn = tl.cdiv(N, BLOCK_N)");
        b.line("block_elems = BLOCK_M * N");
        b.block("for t in range(tl.program_id(0), blocks * num_pn, tl.num_programs(0))", (body) => {
          body.line("i = t // num_pn");
          body.line("pn = t % num_pn");
          body.line("rows = tl.arange(0, BLOCK_M)");
          body.line("cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)");
          body.line("mask = cols[None, :] < N");
          body.line("off = rows[:, None] * N + cols[None, :]");
          body.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)");
          body.block("for k in tl.static_range(CONTRIB)", (l) => {
            l.line("slot = tl.load(slot_ptr + k * blocks + i)");
            l.line("base = (k * blocks + i) * block_elems");
            l.line("src = part_ptr");
            l.block("if slot < 0", (own) => {
              own.line("base = tl.load(block_ptr + i) * block_elems");
              own.line("src = own_ptr");
            });
            l.block("else", (peer) => {
              peer.line("tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)");
              peer.line("base = consume_token(base, tok)");
            });
            // The alignment hint on the pointer itself: Triton drops one on an opaque integer.
            l.line("blk = tl.multiple_of(src + base, 16)");
            l.line("acc += tl.load(blk + off, mask=mask).to(tl.float32)");
          });
          body.line(`dst = tl.multiple_of(out_ptr + i * block_elems, 16)`);
          body.line(`tl.store(dst + off, acc.to(${dtype}), mask=mask)`);
          body.block("if done_base >= 0", (n) => n.line("notify_slot(sig_ptr, done_base + i)"));
        });
      }),
  );
}
