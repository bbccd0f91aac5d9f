// SM communication kernels for the SM backends (AutoOverlap Table 2, "SM load/store on
// dedicated SMs"): each program moves one contiguous segment listed in a per-rank
// segment table, waiting before it and notifying after it with the device primitives.
import { ELEMENT_BYTES, type ElementType } from "../../../core/device/index.js";
import { EmitError } from "../../../core/writer/index.js";
import { checkBlock, type KernelTemplateInfo, kernelModule, signature, type SourceOptions } from "./common.js";

/** Fields of one `sm-push` segment row (int64), in order. */
export const SM_PUSH_FIELDS = ["src_offset", "dst_rank", "dst_offset", "length", "wait_at", "wait_arrivals", "notify_at"] as const;
/** Fields of one `sm-pull` segment row (int64), in order. */
export const SM_PULL_FIELDS = ["src_rank", "src_offset", "dst_offset", "length", "wait_at", "wait_arrivals", "notify_at"] as const;
/** Fields of one `ring-reduce` segment row (int64), in order. */
export const RING_REDUCE_FIELDS = [
  "recv_offset",
  "acc_offset",
  "length",
  "wait_at",
  "wait_arrivals",
  "fwd_rank",
  "fwd_offset",
  "notify_at",
] as const;

/** `sm-push`: copy a local segment into a peer's symmetric buffer, then notify the peer. */
export const SM_PUSH: KernelTemplateInfo = {
  kind: "sm-push",
  entry: "sm_push",
  args: ["src_ptr", "dst_ptrs", "sig_ptr", "sig_ptrs", "seg_ptr", "num_segments", "err_ptr", "rank", "epoch_ptr", "timeout_ns"],
  constexprs: ["BLOCK"],
};

/** `sm-pull`: wait on a peer's slot, copy its segment here, then notify a local slot. */
export const SM_PULL: KernelTemplateInfo = {
  kind: "sm-pull",
  entry: "sm_pull",
  args: ["src_ptrs", "dst_ptr", "sig_ptr", "sig_ptrs", "seg_ptr", "num_segments", "err_ptr", "rank", "epoch_ptr", "timeout_ns"],
  constexprs: ["BLOCK"],
};

/** `ring-reduce`: reduce a received chunk into the local accumulator and forward the sum. */
export const RING_REDUCE: KernelTemplateInfo = {
  kind: "ring-reduce",
  entry: "ring_reduce",
  args: [
    "recv_ptr",
    "acc_ptr",
    "recv_ptrs",
    "sig_ptr",
    "sig_ptrs",
    "seg_ptr",
    "num_segments",
    "err_ptr",
    "rank",
    "epoch_ptr",
    "timeout_ns",
  ],
  constexprs: ["BLOCK"],
};

/** Parameters of the SM communication kernels: `BLOCK` elements moved per step (a power of two, 128..8192). */
export interface SmCommParams {
  readonly BLOCK: number;
}

/** Checks {@link SmCommParams}. */
export function checkSmCommParams(p: SmCommParams): SmCommParams {
  checkBlock(p.BLOCK, "BLOCK", 128, 8192);
  return p;
}

/** The writer a template's kernel body is written with. */
export type Writer = Parameters<Parameters<typeof kernelModule>[2]>[0];

/**
 * The segment loop: a few programs (the communication SMs) stride over the table's rows,
 * so spinning waits never occupy more SMs than the grid gives them.
 */
export function forEachSegment(w: Writer, fields: readonly string[], body: (w: Writer) => void): void {
  w.block("for seg in tl.range(tl.program_id(0), num_segments, tl.num_programs(0))", (l) => {
    l.line(`row = seg_ptr + seg * ${fields.length}`);
    fields.forEach((f, i) => l.line(`${f} = tl.load(row + ${i})`));
    body(l);
  });
}

/** A bounded wait on `sig_base[wait_at]` for `epoch × wait_arrivals`, its token folded into `zero`. */
export function waitIntoZero(w: Writer, sigBase: string): void {
  w.line("zero = rank * 0");
  w.block("if wait_at >= 0", (i) => {
    i.line("target = load_epoch_target(epoch_ptr, wait_arrivals)");
    i.line(`tok = wait_slot(${sigBase}, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)`);
    // An opaque zero that depends on the wait: offsets built from it cannot move above it.
    i.line("zero = consume_token(wait_at.to(tl.int32) * 0, tok)");
  });
}

/** A pointer the segment loop steps through: its name and the expression of its segment start. */
interface Stream {
  readonly name: string;
  readonly start: string;
}

/**
 * Moves a segment of `length` elements in steps of `BLOCK`: whole steps first, each pointer
 * hinted 16-byte aligned so that the loads and stores vectorise (Triton keeps a hint on a
 * pointer, not on a table-loaded integer, and a per-element mask defeats it), then one
 * masked step for the tail. `body(w, mask)` writes one step over `<name> + offs` with
 * `mask` (`None` in whole steps). The segment starts must be 16-byte aligned: the emitters
 * write segment offsets in multiples of 16 bytes (`checkSegmentAlignment`).
 */
function segmentLoop(w: Writer, streams: readonly Stream[], body: (w: Writer, mask: string) => void): void {
  w.line("whole = length - length % BLOCK");
  w.block("for i in range(0, whole, BLOCK)", (l) => {
    for (const s of streams) l.line(`${s.name} = tl.multiple_of(${s.start} + i, 16)`);
    body(l, "None");
  });
  w.block("if whole < length", (t) => {
    for (const s of streams) t.line(`${s.name} = ${s.start} + whole`);
    t.line("m = offs < length - whole");
    body(t, "m");
  });
}

/**
 * Source of `sm_push`. Programs stride over the `num_segments` rows of the int64 segment table
 * ({@link SM_PUSH_FIELDS}); if `wait_at >= 0` it waits (bounded) on the local slot for
 * `epoch × wait_arrivals` (e.g. the tile-done slot of the rows it sends); it copies
 * `length` elements from `src[src_offset..]` to `dst_rank`'s buffer at `dst_offset`
 * (through the `dst_ptrs` peer-pointers table) in steps of `BLOCK`; then, if
 * `notify_at >= 0`, release-adds 1 to the peer's slot (`peer_tile_notify`).
 */
export function smPushSource(params: SmCommParams, options: SourceOptions = {}): string {
  checkSmCommParams(params);
  return kernelModule("sm-push: copy a contiguous segment into a peer's buffer, then notify the peer.", options.dtype, (w) => {
    w.block(signature(SM_PUSH), (f) =>
      forEachSegment(f, SM_PUSH_FIELDS, (b) => {
        waitIntoZero(b, "sig_ptr");
        b.line("offs = tl.arange(0, BLOCK)");
        segmentLoop(
          b,
          [
            { name: "src", start: "src_ptr + src_offset + zero" },
            { name: "dst", start: "peer_base(dst_ptrs, dst_rank, src_ptr) + dst_offset" },
          ],
          (l, m) => l.line(`tl.store(dst + offs, tl.load(src + offs, mask=${m}), mask=${m})`),
        );
        b.block("if notify_at >= 0", (n) => n.line("peer_notify(sig_ptrs, dst_rank, notify_at)"));
      }),
    );
  });
}

/**
 * Source of `sm_pull`. Programs stride over the rows ({@link SM_PULL_FIELDS}); if
 * `wait_at >= 0` it waits on `src_rank`'s slot (read through `sig_ptrs`) for
 * `epoch × wait_arrivals`; it copies `length` elements of `src_rank`'s buffer at
 * `src_offset` into the local `dst[dst_offset..]`; then, if `notify_at >= 0`,
 * release-adds 1 to the local slot.
 */
export function smPullSource(params: SmCommParams, options: SourceOptions = {}): string {
  checkSmCommParams(params);
  return kernelModule("sm-pull: wait on a peer's slot, copy its segment here, then notify a local slot.", options.dtype, (w) => {
    w.block(signature(SM_PULL), (f) =>
      forEachSegment(f, SM_PULL_FIELDS, (b) => {
        b.line("peer_sig = tl.load(sig_ptrs + src_rank).to(tl.pointer_type(tl.int32))");
        waitIntoZero(b, "peer_sig");
        b.line("offs = tl.arange(0, BLOCK)");
        segmentLoop(
          b,
          [
            { name: "src", start: "peer_base(src_ptrs, src_rank, dst_ptr) + src_offset + zero" },
            { name: "dst", start: "dst_ptr + dst_offset" },
          ],
          (l, m) => l.line(`tl.store(dst + offs, tl.load(src + offs, mask=${m}), mask=${m})`),
        );
        b.block("if notify_at >= 0", (n) => n.line("notify_slot(sig_ptr, notify_at)"));
      }),
    );
  });
}

/**
 * Source of `ring_reduce`. Programs stride over the rows ({@link RING_REDUCE_FIELDS}); it
 * waits on the local slot `wait_at` for `epoch × wait_arrivals` (the chunk has arrived
 * in `recv`), computes `acc[acc_offset..] + recv[recv_offset..]` in fp32 and stores it
 * into `acc`; if `fwd_rank >= 0` it also stores the sum into `fwd_rank`'s `recv` buffer
 * at `fwd_offset` (the next ring step) and release-adds 1 to that rank's `notify_at`,
 * else it release-adds 1 to the local `notify_at` (the chunk is fully reduced).
 */
export function ringReduceSource(params: SmCommParams, options: SourceOptions = {}): string {
  checkSmCommParams(params);
  return kernelModule("ring-reduce: reduce a received chunk into the local accumulator and forward it.", options.dtype, (w) => {
    w.block(signature(RING_REDUCE), (f) =>
      forEachSegment(f, RING_REDUCE_FIELDS, (b) => {
        waitIntoZero(b, "sig_ptr");
        b.line("offs = tl.arange(0, BLOCK)");
        // Without a forward the peer pointer is never used: the local accumulator stands in.
        b.line("fwd_base = acc_ptr");
        b.block("if fwd_rank >= 0", (f) => f.line("fwd_base = peer_base(recv_ptrs, fwd_rank, recv_ptr) + fwd_offset"));
        segmentLoop(
          b,
          [
            { name: "recv", start: "recv_ptr + recv_offset + zero" },
            { name: "acc", start: "acc_ptr + acc_offset" },
            { name: "fwd", start: "fwd_base" },
          ],
          (l, m) => {
            l.line(`got = tl.load(recv + offs, mask=${m}).to(tl.float32)`);
            l.line(`mine = tl.load(acc + offs, mask=${m}).to(tl.float32)`);
            l.line("total = (got + mine).to(acc_ptr.dtype.element_ty)");
            l.line(`tl.store(acc + offs, total, mask=${m})`);
            l.block("if fwd_rank >= 0", (f) => f.line(`tl.store(fwd + offs, total, mask=${m})`));
          },
        );
        b.block("if notify_at >= 0", (n) => {
          n.block("if fwd_rank >= 0", (f) => f.line("peer_notify(sig_ptrs, fwd_rank, notify_at)"));
          n.block("else", (e) => e.line("notify_slot(sig_ptr, notify_at)"));
        });
      }),
    );
  });
}

/** Elements of `dtype` in 16 bytes: the alignment unit of SM copy segments. */
export function alignmentUnit(dtype: ElementType): number {
  return 16 / ELEMENT_BYTES[dtype];
}

/**
 * Checks that every segment start of one rank's flattened segment table (rows of `fields`;
 * the fields named in `checked`) is a whole number of 16-byte units of `dtype`: the segment
 * loops hint their pointers 16-byte aligned so that copies vectorise, and a misaligned start
 * would then read or write the wrong elements (lengths need not be: the tail step is masked).
 * @throws {EmitError} `bad-param` naming the row and field.
 */
export function checkSegmentAlignment(
  flat: readonly number[],
  fields: readonly string[],
  checked: readonly string[],
  dtype: ElementType,
): void {
  const unit = alignmentUnit(dtype);
  const at = checked.map((f) => {
    const i = fields.indexOf(f);
    if (i < 0) throw new EmitError("bad-param", `segment tables have no field ${f}`);
    return i;
  });
  for (let r = 0; r * fields.length < flat.length; r++) {
    for (const i of at) {
      const v = flat[r * fields.length + i] ?? 0;
      if (v % unit !== 0) {
        throw new EmitError(
          "bad-param",
          `segment ${r}: ${fields[i]} = ${v} is not a multiple of ${unit} ${dtype} elements (16 bytes); SM copies need 16-byte aligned segment starts`,
        );
      }
    }
  }
}
