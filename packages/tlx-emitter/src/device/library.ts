// The device-side primitive library (TileLink §3 Table 3 on SMs) as text, written into
// every TLX kernel module (plain Triton kernels import the same names from the runner's
// `ovl_runtime.language` instead; see common.ts `kernelModule`): acquire loads and a bounded, wrap-aware wait that records a
// timeout instead of hanging; the token that keeps loads below a wait; release notifies
// on a local or peer slot; peer tile loads and stores through a peer-pointers table.
import type { PythonWriter } from "../writer/index.js";

/** Element types kernels compute in, and their `tl` names. */
export const TL_DTYPE = { bf16: "tl.bfloat16", fp16: "tl.float16", fp32: "tl.float32" } as const;
/** An element type a kernel template accepts. */
export type ElementType = keyof typeof TL_DTYPE;

/** Names the library defines, so templates refer to them by one spelling. */
export const DEVICE_FUNCTIONS = [
  "ld_acquire_sys",
  "global_timer",
  "load_epoch_target",
  "wait_slot",
  "consume_token",
  "notify_slot",
  "peer_notify",
  "peer_base",
  "peer_tile_load",
  "peer_tile_store",
] as const;

/**
 * Write the primitive library for element type `dtype` (peer tile loads and stores are
 * typed by it). Semantics:
 * - `wait_slot` is `consumer_tile_wait` / `peer_tile_wait` with acquire at `sys` scope:
 *   it spins on `ld.global.acquire.sys` until `(seen - target) < 0` is false in int32
 *   (wrap-aware, so the epoch counter may overflow), bounded by `timeout_ns` of
 *   `%globaltimer`; on timeout it records `(1, rank, slot, seen, target)` in `err_ptr`
 *   and returns, so a mistake is an error the host reads, never a hung GPU.
 * - `load_epoch_target(epoch_ptr, arrivals)` is this launch's wait target, `epoch × arrivals`
 *   in int32 (wrapping like the host's rule), from the rank's epoch word on the device.
 * - `consume_token(x, token)` returns `x` through an opaque move that depends on the
 *   token, so loads addressed by it cannot be hoisted above the wait (TileLink §4.2).
 * - `notify_slot` / `peer_notify` are `producer_tile_notify` / `peer_tile_notify`: a
 *   `tl.debug_barrier()` so every thread's stores precede it, then an `atomic_add` of 1
 *   with `sem="release", scope="sys"` on the local slot or on a peer's slot.
 * - `peer_base`, `peer_tile_load`, `peer_tile_store` address a peer's symmetric buffer
 *   through a `peer-pointers` table (int64 base addresses, one per rank).
 */
export function writeDeviceLibrary(w: PythonWriter, dtype: ElementType): void {
  const tlType = TL_DTYPE[dtype];
  w.line("@triton.jit");
  w.block("def ld_acquire_sys(ptr)", (b) => {
    b.docstring("Load one int32 with acquire semantics at system scope (a peer's or the copy engine's release is seen).");
    b.line('return tl.inline_asm_elementwise("ld.global.acquire.sys.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)');
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def global_timer()", (b) => {
    b.docstring("Nanoseconds of the GPU global timer.");
    b.line('return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)');
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def load_epoch_target(epoch_ptr, arrivals)", (b) => {
    b.docstring("This launch's wait target: epoch x arrivals in int32 (wrapping), the epoch read from the rank's epoch word.");
    b.line("return (tl.load(epoch_ptr) * arrivals).to(tl.int32)");
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)", (b) => {
    b.docstring(
      "Acquire-spin until sig[slot] reaches target, compared wrap-aware in int32; bounded by timeout_ns.",
      "On timeout records (1, rank, slot, seen, target) in err_ptr and returns. The result is the token.",
    );
    b.line("v = ld_acquire_sys(sig_ptr + slot)");
    b.line("t0 = global_timer()");
    b.block("while (v - target) < 0", (l) => {
      l.line("v = ld_acquire_sys(sig_ptr + slot)");
      l.block("if global_timer() - t0 > timeout_ns", (t) => {
        t.line("tl.atomic_xchg(err_ptr + 1, rank)");
        t.line("tl.atomic_xchg(err_ptr + 2, slot)");
        t.line("tl.atomic_xchg(err_ptr + 3, v)");
        t.line("tl.atomic_xchg(err_ptr + 4, target)");
        t.line("tl.atomic_xchg(err_ptr + 0, 1)");
        t.line("v = target");
      });
    });
    b.line("return v");
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def consume_token(x, token)", (b) => {
    b.docstring("x, as a value that depends on token: loads addressed by it stay below the wait that made the token.");
    b.line('return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x, token], dtype=tl.int32, is_pure=True, pack=1)');
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def notify_slot(sig_ptr, slot)", (b) => {
    b.docstring("Release-add 1 to this rank's sig[slot] at system scope, after every thread's stores.");
    b.line("tl.debug_barrier()");
    b.line('tl.atomic_add(sig_ptr + slot, 1, sem="release", scope="sys")');
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def peer_notify(sig_ptrs, peer, slot)", (b) => {
    b.docstring("Release-add 1 to peer's sig[slot] (sig_ptrs: the signal buffer's peer-pointers table).");
    b.line("sig = tl.load(sig_ptrs + peer).to(tl.pointer_type(tl.int32))");
    b.line("tl.debug_barrier()");
    b.line('tl.atomic_add(sig + slot, 1, sem="release", scope="sys")');
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def peer_base(ptrs, peer)", (b) => {
    b.docstring(`Base pointer of peer's symmetric buffer (elements of ${dtype}) from a peer-pointers table.`);
    b.line(`return tl.load(ptrs + peer).to(tl.pointer_type(${tlType}))`);
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def peer_tile_load(ptrs, peer, offs, mask)", (b) => {
    b.docstring("Load elements offs of peer's buffer (a tile_pull_data).");
    b.line("return tl.load(peer_base(ptrs, peer) + offs, mask=mask)");
  });
  w.line().line();
  w.line("@triton.jit");
  w.block("def peer_tile_store(ptrs, peer, offs, vals, mask)", (b) => {
    b.docstring("Store vals at elements offs of peer's buffer (a tile_push_data).");
    b.line("tl.store(peer_base(ptrs, peer) + offs, vals, mask=mask)");
  });
}
