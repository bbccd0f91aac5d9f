// Device functions only warp-specialised kernels need, written into the TLX module (the
// primitives of the plain path — bounded acquire waits, tokens, peer pointers — are imported
// from `ovl_runtime.language` like every other kernel's): a proxy fence between a wait and
// TMA reads, and a notify that syncs only the communication warp group (a CTA-wide barrier
// would stall the other tasks forever).
import type { PythonWriter } from "../../core/writer/index.js";

/** Bulk store groups a tile's epilogue may commit (the `cp.async.bulk.wait_group` immediates `tile_notify` knows). */
export const MAX_STORE_GROUPS = 4;

/** Functions `writeTlxLibrary` writes into a TLX module. */
export const TLX_DEVICE_FUNCTIONS = ["fence_proxy_async", "task_peer_notify", "tile_notify", "tile_reduce_notify"] as const;
export type TlxDeviceFunction = (typeof TLX_DEVICE_FUNCTIONS)[number];

/**
 * The statement that waits until at most `pending` of this thread's newest bulk (TMA) store
 * groups are incomplete (`cp.async.bulk.wait_group <pending>`, an immediate).
 */
export function bulkStoreWait(pending: number): string {
  return `tl.inline_asm_elementwise("cp.async.bulk.wait_group ${pending}; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)`;
}

/**
 * Write `only` (default: both) of:
 * - `fence_proxy_async(token)`: `fence.proxy.async.global` and the token back. TMA reads
 *   go through the async proxy; the fence orders them after the generic-proxy acquire of
 *   `wait_slot`, and returning the token keeps the loads data-dependent on the wait.
 * - `task_peer_notify(sig_ptrs, peer, slot, BAR_ID, BAR_THREADS)`: `peer_tile_notify`
 *   from a warp group: a named barrier over that group's threads (its stores first), then
 *   a release add of 1 at system scope on the peer's slot.
 * - `tile_notify(sig_ptr, slot, BAR_ID, BAR_THREADS, LEADER, SCOPE, PENDING)`: a tile's
 *   notify from the consumers that stored it: each thread waits until at most its PENDING
 *   newest bulk (TMA) store groups are incomplete (`cp.async.bulk.wait_group PENDING`), a
 *   named barrier over those threads, then, in the leading warp group and for a slot
 *   (>= 0), a release add of 1 on this rank's `sig[slot]` at SCOPE.
 * - `tile_reduce_notify(sig_desc, rows, slot)`: adds 1 to `sig[slot]` by one TMA reduce-add
 *   (`cp.reduce.async.bulk.tensor`, its own bulk group): `rows` holds four 128-byte aligned
 *   rows of 32 int32, row j one-hot at j, and row `slot % 4` goes to the 16-byte aligned
 *   group of four slots at `slot - slot % 4` (its neighbours get 0; `sig_desc`, a 1-D
 *   descriptor of `[4]` boxes, clips the group at the signal buffer's end).
 */
export function writeTlxLibrary(w: PythonWriter, only: readonly TlxDeviceFunction[] = TLX_DEVICE_FUNCTIONS): void {
  const parts: ((w: PythonWriter) => void)[] = [];
  if (only.includes("fence_proxy_async")) {
    parts.push((m) => {
      m.line("@triton.jit");
      m.block("def fence_proxy_async(token)", (b) => {
        b.docstring("Order later TMA (async proxy) reads of global memory after the acquire that produced token; returns token.");
        b.line(
          'return tl.inline_asm_elementwise("fence.proxy.async.global; mov.b32 $0, $1;", "=r,r", [token], dtype=tl.int32, is_pure=False, pack=1)',
        );
      });
    });
  }
  if (only.includes("task_peer_notify")) {
    parts.push((m) => {
      m.line("@triton.jit");
      m.block("def task_peer_notify(sig_ptrs, peer, slot, BAR_ID: tl.constexpr, BAR_THREADS: tl.constexpr)", (b) => {
        b.docstring("Release-add 1 to peer's sig[slot] after every store of this warp group (named barrier BAR_ID).");
        b.line("sig = tl.load(sig_ptrs + peer).to(tl.pointer_type(tl.int32))");
        b.line("tlx.named_barrier_wait(BAR_ID, BAR_THREADS)");
        b.line('tl.atomic_add(sig + slot, 1, sem="release", scope="sys")');
      });
    });
  }
  if (only.includes("tile_notify")) {
    parts.push((m) => {
      m.line("@triton.jit");
      m.block(
        "def tile_notify(sig_ptr, slot, BAR_ID: tl.constexpr, BAR_THREADS: tl.constexpr, LEADER: tl.constexpr, SCOPE: tl.constexpr, PENDING: tl.constexpr)",
        (b) => {
          b.docstring(
            "Release-add 1 to sig[slot] (slot >= 0) once every bulk (TMA) store of this thread but the PENDING newest groups is complete, and every thread of the tile has got there.",
          );
          b.block("if PENDING == 0", (x) => x.line(bulkStoreWait(0)));
          for (let n = 1; n < MAX_STORE_GROUPS; n++) b.block(`elif PENDING == ${n}`, (x) => x.line(bulkStoreWait(n)));
          b.block("else", (x) => {
            x.line(`tl.static_assert(PENDING == ${MAX_STORE_GROUPS})`);
            x.line(bulkStoreWait(MAX_STORE_GROUPS));
          });
          b.line("tlx.named_barrier_wait(BAR_ID, BAR_THREADS)");
          b.block("if LEADER", (l) =>
            l.block("if slot >= 0", (i) => i.line('tl.atomic_add(sig_ptr + slot, 1, sem="release", scope=SCOPE)')),
          );
        },
      );
    });
  }
  if (only.includes("tile_reduce_notify")) {
    parts.push((m) => {
      m.line("@triton.jit");
      m.block("def tile_reduce_notify(sig_desc, rows, slot)", (b) => {
        b.docstring("Add 1 to sig[slot] by one TMA reduce-add of row slot % 4 of rows (one-hot) at slot's 16-byte aligned group of four.");
        b.line("r = slot % 4");
        b.line("at = slot - r");
        // The row is chosen by static slices: a TMA source is a whole, 128-byte aligned view.
        for (let j = 0; j < 4; j++) {
          const store = `tlx.async_descriptor_store(sig_desc, tlx.local_slice(rows, [${32 * j}], [4]), [at], store_reduce="add")`;
          if (j === 0) b.block("if r == 0", (x) => x.line(store));
          else if (j < 3) b.block(`elif r == ${j}`, (x) => x.line(store));
          else b.block("else", (x) => x.line(store));
        }
      });
    });
  }
  parts.forEach((part, i) => {
    if (i > 0) w.line().line();
    part(w);
  });
}
