// The NVSHMEM communication kernel of the `nvshmem` transfer backend (device-initiated
// transfers through an existing engine): the `sm-push` segment table and bounded waits, each
// segment moved by one NVSHMEM put-with-signal to the destination PE, the data and a signal add
// in one operation. NVSHMEM addresses a peer by PE number and the symmetric address of the
// local copy, so the kernel takes no peer-pointers table: it also runs where peer pointers are
// unavailable (between nodes, or under PyTorch's NVSHMEM symmetric-memory backend).
import { EmitError } from "../../../core/writer/index.js";
import { forEachSegment, SM_PUSH_FIELDS, waitIntoZero } from "./sm-comm.js";
import { type KernelTemplateInfo, kernelModule, signature, type SourceOptions } from "./common.js";

/** The Python module of the runner that defines the NVSHMEM device calls of emitted kernels. */
export const NVSHMEM_MODULE = "ovl_runtime.nvshmem";

/** Names `ovl_runtime.nvshmem` defines for kernels (its `DEVICE_FUNCTIONS`; a runner test checks both lists agree). */
export const NVSHMEM_FUNCTIONS = ["put_signal_add"] as const;

/** What a manifest kernel that calls NVSHMEM declares in `kernels[i].requires`. */
export const NVSHMEM_REQUIREMENT = "nvshmem" as const;

/** Fields of one `nvshmem-push` segment row (int64), in order: those of `sm-push`. */
export const NVSHMEM_PUSH_FIELDS = SM_PUSH_FIELDS;

/** `nvshmem-push`: wait (bounded) on a local slot, then put a segment to a PE with a signal add on its slot. */
export const NVSHMEM_PUSH: KernelTemplateInfo = {
  kind: "nvshmem-push",
  entry: "nvshmem_push",
  args: ["src_ptr", "dst_ptr", "sig_ptr", "seg_ptr", "num_segments", "err_ptr", "rank", "epoch_ptr", "timeout_ns"],
  constexprs: [],
};

/**
 * Signal slot `s` of a plan on the `nvshmem` backend: `2·s`. An NVSHMEM signal is a 64-bit word
 * on an 8-byte boundary, and ovl's waits read 32-bit slots: the signal of plan slot `s` is the
 * 64-bit word over int32 slots `2s` (its low half, where the count lives on little-endian GPUs)
 * and `2s + 1` (its high half, which only a carry after 2^32 arrivals would touch, and which no
 * one else uses). The signal buffer's base is 8-byte aligned (symmetric allocations are).
 */
export function nvshmemSlot(slot: number): number {
  if (!Number.isSafeInteger(slot) || slot < 0) throw new EmitError("bad-param", `signal slot must be a non-negative integer, got ${slot}`);
  return 2 * slot;
}

/** Int32 slots of a signal buffer holding `slots` NVSHMEM signals (see {@link nvshmemSlot}). */
export function nvshmemSlotCount(slots: number): number {
  return 2 * slots;
}

/**
 * Checks one rank's flattened `nvshmem-push` table (rows of {@link NVSHMEM_PUSH_FIELDS}): every row
 * that moves data signals (a put without a signal would complete no wait, and NVSHMEM delivers
 * it only by a later quiet), and every signalled slot is even (a 64-bit signal word,
 * {@link nvshmemSlot}) inside the `slots` int32 slots of the buffer.
 * @throws {EmitError} `bad-param` naming the row.
 */
export function checkNvshmemRows(flat: readonly number[], slots: number): void {
  const n = NVSHMEM_PUSH_FIELDS.length;
  const at = (f: (typeof NVSHMEM_PUSH_FIELDS)[number]) => NVSHMEM_PUSH_FIELDS.indexOf(f);
  for (let r = 0; r * n < flat.length; r++) {
    const row = (f: (typeof NVSHMEM_PUSH_FIELDS)[number]) => flat[r * n + at(f)] ?? 0;
    const notify = row("notify_at");
    if (row("length") > 0 && notify < 0)
      throw new EmitError(
        "bad-param",
        `segment ${r}: moves ${row("length")} elements but signals no slot; an NVSHMEM put signals its arrival`,
      );
    if (notify >= 0 && (notify % 2 !== 0 || notify + 1 >= slots))
      throw new EmitError(
        "bad-param",
        `segment ${r}: notify_at ${notify} is not the low half of a 64-bit signal word (an even slot below ${slots - 1})`,
      );
  }
}

/**
 * Source of `nvshmem_push`. Programs stride over the `num_segments` rows of the int64 segment
 * table ({@link NVSHMEM_PUSH_FIELDS}); if `wait_at >= 0` a row waits (bounded, `wait_slot`) on the
 * local slot for `epoch × wait_arrivals` (the tile-done slot of the rows it sends, or the arrival
 * of a chunk it forwards); then, if `notify_at >= 0`, every thread of the program calls
 * `put_signal_add`: NVSHMEM's block-scoped put-with-signal of `length` elements from
 * `src[src_offset..]` to `dst[dst_offset..]` on PE `dst_rank`, adding 1 to that PE's signal word
 * at `notify_at` once the data has landed. The waits on the receiving side are ovl's own
 * (`wait_slot` on the low half of the word): bounded and named, unlike NVSHMEM's
 * `signal_wait_until`, and the count keeps the monotone-epoch contract (one add per arrival,
 * waits for `epoch × arrivals`).
 */
export function nvshmemPushSource(options: SourceOptions = {}): string {
  const summary = "nvshmem-push: wait on a local slot, then put a segment to a PE with a signal add on its slot (NVSHMEM).";
  return kernelModule(
    summary,
    options.dtype,
    (w) => {
      w.block(signature(NVSHMEM_PUSH), (f) =>
        forEachSegment(f, NVSHMEM_PUSH_FIELDS, (b) => {
          waitIntoZero(b, "sig_ptr");
          // Addresses built from the wait's token cannot be read before the wait; the local
          // symmetric addresses name the same offsets on the destination PE.
          b.block("if notify_at >= 0", (n) =>
            n.line("put_signal_add(dst_ptr + dst_offset, src_ptr + src_offset + zero, length, sig_ptr + notify_at, dst_rank)"),
          );
        }),
      );
    },
    { how: "NVSHMEM", imports: [`from ${NVSHMEM_MODULE} import ${NVSHMEM_FUNCTIONS.join(", ")}`] },
  );
}
