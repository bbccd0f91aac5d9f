// Tile communication kernels of DistFuse's tile-wise AllReduce (GEMM+AR): `tile-push` moves
// one finished output tile (strided rows, not one contiguous run) into the rank that owns its
// rows, `ar-tile-reduce` sums a tile's partials there and stores the sum into every rank's
// output. Both stride over a per-rank table of tiles, as the SM copy kernels do.
import { EmitError } from "../../../core/writer/index.js";
import { checkBlock, checkPositive, type KernelTemplateInfo, kernelModule, signature, type SourceOptions } from "./common.js";
import { forEachSegment, waitIntoZero, type Writer } from "./sm-comm.js";

/** Fields of one `tile-push` row (int64), in order. */
export const TILE_PUSH_FIELDS = ["src_offset", "dst_rank", "dst_offset", "rows", "cols", "wait_at", "wait_arrivals", "notify_at"] as const;
/** Fields of one `ar-tile-reduce` row (int64), in order. */
export const AR_TILE_FIELDS = ["own_offset", "part_offset", "out_offset", "rows", "cols", "wait_at", "wait_arrivals", "notify_at"] as const;

/** `tile-push`: wait for a local tile, copy it into a peer's symmetric buffer, notify the peer. */
export const TILE_PUSH: KernelTemplateInfo = {
  kind: "tile-push",
  entry: "tile_push",
  args: [
    "src_ptr",
    "dst_ptrs",
    "sig_ptr",
    "sig_ptrs",
    "seg_ptr",
    "num_segments",
    "row_stride",
    "err_ptr",
    "rank",
    "epoch_ptr",
    "timeout_ns",
  ],
  constexprs: ["BLOCK_R", "BLOCK_C"],
};

/** `ar-tile-reduce`: wait for a tile's partials, sum them, store the sum into every rank's output, notify every rank. */
export const AR_TILE_REDUCE: KernelTemplateInfo = {
  kind: "ar-tile-reduce",
  entry: "ar_tile_reduce",
  args: [
    "own_ptr",
    "part_ptr",
    "out_ptrs",
    "sig_ptr",
    "sig_ptrs",
    "seg_ptr",
    "num_segments",
    "row_stride",
    "slab_elems",
    "done_at",
    "err_ptr",
    "rank",
    "epoch_ptr",
    "timeout_ns",
  ],
  constexprs: ["WORLD", "BLOCK_R", "BLOCK_C"],
};

/** Parameters of the tile kernels: rows moved per step and the column block (≥ every tile's width). */
export interface TileCommParams {
  /** Rows per step (a power of two, 1..256). */
  readonly BLOCK_R: number;
  /** Columns of the step (a power of two, 16..256): at least the widest tile. */
  readonly BLOCK_C: number;
  /** `ar-tile-reduce` only: ranks whose partials are summed. */
  readonly WORLD?: number;
}

/** Checks {@link TileCommParams}. @throws {EmitError} `bad-param`. */
export function checkTileCommParams(p: TileCommParams): TileCommParams {
  checkBlock(p.BLOCK_R, "BLOCK_R", 1, 256);
  checkBlock(p.BLOCK_C, "BLOCK_C", 16, 256);
  if (p.BLOCK_R * p.BLOCK_C > 16384) {
    throw new EmitError("bad-param", `BLOCK_R × BLOCK_C (${p.BLOCK_R} × ${p.BLOCK_C}) must be at most 16384 elements per step`);
  }
  if (p.WORLD !== undefined) checkPositive(p.WORLD, "WORLD");
  return p;
}

/**
 * Rows per step of a tile `BLOCK_C` columns wide that moves about `elements` per step
 * (the SM copy kernels' `commBlock`): a power of two in `1 .. min(rows, 256)`.
 */
export function tileStepRows(elements: number, blockC: number, rows: number): number {
  let r = 1;
  while (r * 2 * blockC <= elements && r * 2 <= Math.min(rows, 256)) r *= 2;
  return r;
}

/**
 * The tile loop: the tile's rows in steps of `BLOCK_R`, every step a `BLOCK_R × BLOCK_C`
 * block at `r0 · row_stride` masked to the tile's `rows × cols` (a row of 0 does nothing).
 * Tile starts are 16-byte aligned (`checkSegmentAlignment`) and hinted so on their base
 * pointers, so the column loads vectorise.
 */
function tileSteps(w: Writer, body: (w: Writer) => void): void {
  w.line("r = tl.arange(0, BLOCK_R)");
  w.line("c = tl.arange(0, BLOCK_C)");
  w.block("for r0 in range(0, rows, BLOCK_R)", (l) => {
    l.line("mask = ((r0 + r)[:, None] < rows) & (c[None, :] < cols)");
    l.line("off = (r0 + r)[:, None] * row_stride + c[None, :]");
    body(l);
  });
}

/**
 * Source of `tile_push`. Programs stride over the rows of the int64 table
 * ({@link TILE_PUSH_FIELDS}); if `wait_at >= 0` a row waits (bounded) on the local slot for
 * `epoch × wait_arrivals` (the tile's done flag), copies the `rows × cols` tile at
 * `src[src_offset..]` (row stride `row_stride`) to `dst_rank`'s buffer at `dst_offset`
 * (same stride) through the `dst_ptrs` peer-pointers table (`tile_push_data`), then, if
 * `notify_at >= 0`, release-adds 1 to the peer's slot (`peer_tile_notify`).
 */
export function tilePushSource(params: TileCommParams, options: SourceOptions = {}): string {
  checkTileCommParams(params);
  return kernelModule("tile-push: copy a finished tile into the rank that owns its rows, then notify that rank.", options.dtype, (w) => {
    w.block(signature(TILE_PUSH), (f) =>
      forEachSegment(f, TILE_PUSH_FIELDS, (b) => {
        waitIntoZero(b, "sig_ptr");
        b.line("src = tl.multiple_of(src_ptr + src_offset + zero, 16)");
        b.line("dst = tl.multiple_of(peer_base(dst_ptrs, dst_rank, src_ptr) + dst_offset, 16)");
        tileSteps(b, (l) => l.line("tl.store(dst + off, tl.load(src + off, mask=mask), mask=mask)"));
        b.block("if notify_at >= 0", (n) => n.line("peer_notify(sig_ptrs, dst_rank, notify_at)"));
      }),
    );
  });
}

/**
 * Source of `ar_tile_reduce`. Programs stride over the rows of the int64 table
 * ({@link AR_TILE_FIELDS}); a row waits (bounded) on the local slot `wait_at` for
 * `epoch × wait_arrivals` (the tile's flag: this rank's own tile done plus every peer's
 * push of it), then per step sums in fp32 this rank's partial (`own[own_offset..]`) and
 * every peer `p`'s pushed partial (`part[p · slab_elems + part_offset..]`), and stores the
 * sum at `out_offset` of every rank's output (`out_ptrs`, this rank's own included). Then,
 * if `notify_at >= 0`, it release-adds 1 to slot `notify_at` (the tile's) and to slot
 * `done_at` (the output's count of reduced tiles) of every rank.
 */
export function arTileReduceSource(params: TileCommParams, options: SourceOptions = {}): string {
  checkTileCommParams(params);
  if (params.WORLD === undefined) throw new EmitError("bad-param", "ar-tile-reduce needs WORLD");
  return kernelModule(
    "ar-tile-reduce: sum a tile's partials at the rank owning its rows and store the sum into every rank's output.",
    options.dtype,
    (w) => {
      w.block(signature(AR_TILE_REDUCE), (f) =>
        forEachSegment(f, AR_TILE_FIELDS, (b) => {
          waitIntoZero(b, "sig_ptr");
          b.line("own = tl.multiple_of(own_ptr + own_offset + zero, 16)");
          b.line("part = part_ptr + part_offset + zero");
          tileSteps(b, (l) => {
            l.line("acc = tl.load(own + off, mask=mask).to(tl.float32)");
            l.block("for p in tl.static_range(WORLD)", (s) => {
              // A rank's own partial is read from its GEMM output; its slab of `part` is unused.
              s.block("if p != rank", (i) =>
                i.line("acc += tl.load(tl.multiple_of(part + p * slab_elems, 16) + off, mask=mask).to(tl.float32)"),
              );
            });
            l.line("total = acc.to(own_ptr.dtype.element_ty)");
            l.block("for p in tl.static_range(WORLD)", (s) => {
              s.line("dst = tl.multiple_of(peer_base(out_ptrs, p, own_ptr) + out_offset, 16)");
              s.line("tl.store(dst + off, total, mask=mask)");
            });
          });
          b.block("if notify_at >= 0", (n) =>
            n.block("for p in tl.static_range(WORLD)", (s) => {
              s.line("peer_notify(sig_ptrs, p, notify_at)");
              s.line("peer_notify(sig_ptrs, p, done_at)");
            }),
          );
        }),
      );
    },
  );
}
