"""The device primitives of ovl kernels (TileLink §3, Table 3, on SMs), as ``@triton.jit`` functions.

Emitted kernel modules import what they use from here
(``from ovl_runtime.language import wait_slot, consume_token``); Triton inlines them into
the kernel. Importable with only ``triton`` installed (no torch at module level).

| function | semantics |
| --- | --- |
| ``ld_acquire_sys(ptr)`` | one int32 loaded with acquire at system scope (``ld.global.acquire.sys``) |
| ``global_timer()`` | ``%globaltimer`` in ns |
| ``load_epoch_target(epoch_ptr, arrivals)`` | this launch's wait target ``epoch × arrivals`` in int32 (wrapping), the epoch read from the rank's epoch word on the device (so a CUDA-graph replay sees the new epoch) |
| ``wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)`` | spins while ``(seen - target) < 0`` in int32 (wrap-aware); after ``timeout_ns`` writes ``(1, rank, slot, seen, target)`` to ``err_ptr[0..4]`` and returns; the result is the token |
| ``consume_token(x, token)`` | ``x`` through an opaque move depending on the token, so loads addressed by it stay below the wait |
| ``notify_slot(sig_ptr, slot)`` | completes this thread's pending TMA stores (``cp.async.bulk.wait_group 0``), a barrier of the program (``bar.sync 0``, one inline-asm statement with the wait, so a flattened tile loop holding it is still software-pipelined), then a release add of 1 at system scope |
| ``notify_slot_gpu(sig_ptr, slot)`` | the same at gpu scope, where only kernels of this device wait on and add to the slot (a system-scope release costs a producer 2–5% at short K loops on an H100) |
| ``notify_slot_if(sig_ptr, slot, cond, count)`` / ``notify_slot_gpu_if(sig_ptr, slot, cond, count)`` | where ``cond`` holds (the same on every thread of the program), ``notify_slot`` / ``notify_slot_gpu`` adding ``count`` (one add for several tiles) as one predicated inline-asm statement whose add is a ``red`` by thread 0; where it does not, nothing but a compare, so a K loop may hold it (a producer that notifies a tile from its next tile's K loop, once its stores are written) |
| ``peer_notify(sig_ptrs, peer, slot)`` | barrier, then the release add on ``peer``'s slot (``sig_ptrs``: the signal buffer's peer-pointers table) |
| ``peer_base(ptrs, peer, like_ptr)`` | ``peer``'s base pointer from a peer-pointers table (int64 addresses), typed like ``like_ptr`` |
| ``peer_tile_load(ptrs, peer, like_ptr, offs, mask)`` / ``peer_tile_store(ptrs, peer, like_ptr, offs, vals, mask)`` | ``tile_pull_data`` / ``tile_push_data`` through the table |

**Interpreter mode.** Triton's CPU interpreter (``TRITON_INTERPRET=1``) cannot run inline
PTX. The choice is made once, at import, from the same setting ``@triton.jit`` reads
(``triton.knobs.runtime.interpret``, i.e. the environment variable): when it is on, the same
names are defined without inline assembly, with the same results:

- ``ld_acquire_sys`` is a volatile ``tl.load`` (the interpreter reads memory directly);
- ``global_timer`` is the host's monotonic clock in ns, after a short sleep that lets the
  threads of the other emulated ranks run (a spinning wait would otherwise hold the GIL);
  the wait bound is thus ``timeout_ns`` of real time, as on the GPU;
- ``wait_slot`` additionally returns at once when this rank already recorded a timeout
  (``err_ptr[0] != 0``), or when the emulation asked every wait to stop
  (``set_interpreter_abort``), so one missing signal costs one bound, not one per tile;
- ``consume_token(x, token)`` is ``x + token * 0``; the TMA wait of ``notify_slot`` is nothing.

Import this module (and the kernels) after setting ``TRITON_INTERPRET``; a module imported
the other way must be reloaded (``importlib.reload``) — ``ovl_runtime.interpret`` does so.
"""

from __future__ import annotations

import os
import threading
import time

import triton
import triton.language as tl

__all__ = [
    "DEVICE_FUNCTIONS",
    "INTERPRET",
    "consume_token",
    "global_timer",
    "ld_acquire_sys",
    "load_epoch_target",
    "notify_slot",
    "notify_slot_gpu",
    "notify_slot_gpu_if",
    "notify_slot_if",
    "peer_base",
    "peer_notify",
    "peer_notify_many",
    "peer_tile_load",
    "peer_tile_store",
    "set_interpreter_abort",
    "wait_slot",
]

DEVICE_FUNCTIONS = (
    "ld_acquire_sys",
    "global_timer",
    "load_epoch_target",
    "wait_slot",
    "consume_token",
    "notify_slot",
    "notify_slot_gpu",
    "notify_slot_if",
    "notify_slot_gpu_if",
    "peer_notify",
    "peer_notify_many",
    "peer_base",
    "peer_tile_load",
    "peer_tile_store",
)


def _interpret_setting() -> bool:
    try:
        return bool(triton.knobs.runtime.interpret)
    except AttributeError:  # a Triton without knobs
        return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes", "y")


INTERPRET: bool = _interpret_setting()
"""Whether the interpreter-safe definitions are in effect (decided at import)."""

# Interpreter only: how long each spin of a wait sleeps (lets the other ranks' threads run).
_SPIN_SLEEP_S = 50e-6
_abort = threading.Event()


def set_interpreter_abort(on: bool) -> None:
    """Interpreter only: make every ``wait_slot`` return at once (``on``), e.g. after a failure
    elsewhere in an emulated launch; ``False`` re-arms the waits."""
    if on:
        _abort.set()
    else:
        _abort.clear()


def _host_now_ns() -> int:
    time.sleep(_SPIN_SLEEP_S)
    return time.monotonic_ns()


def _host_aborted() -> bool:
    return _abort.is_set()


if not INTERPRET:

    @triton.jit
    def ld_acquire_sys(ptr):
        """Load one int32 with acquire semantics at system scope (a peer's or the copy engine's release is seen)."""
        return tl.inline_asm_elementwise("ld.global.acquire.sys.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def global_timer():
        """Nanoseconds of the GPU global timer."""
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)

    @triton.jit
    def wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns):
        """Acquire-spin until sig[slot] reaches target, compared wrap-aware in int32; bounded by timeout_ns.
        On timeout records (1, rank, slot, seen, target) in err_ptr and returns. The result is the token.
        """
        v = ld_acquire_sys(sig_ptr + slot)
        t0 = global_timer()
        while (v - target) < 0:
            v = ld_acquire_sys(sig_ptr + slot)
            if global_timer() - t0 > timeout_ns:
                tl.atomic_xchg(err_ptr + 1, rank)
                tl.atomic_xchg(err_ptr + 2, slot)
                tl.atomic_xchg(err_ptr + 3, v)
                tl.atomic_xchg(err_ptr + 4, target)
                tl.atomic_xchg(err_ptr + 0, 1)
                v = target
        return v

    @triton.jit
    def consume_token(x, token):
        """x, as a value that depends on token: loads addressed by it stay below the wait that made the token."""
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x, token], dtype=tl.int32, is_pure=True, pack=1)

    @triton.jit
    def _stores_done():
        """Wait until this thread's bulk async (TMA) stores are complete, then for every thread of the program
        (``bar.sync 0``): every store of the program, plain or bulk, happens before what follows. One inline-asm
        statement rather than ``tl.debug_barrier()``, which keeps Triton 3.6 from software-pipelining a flattened
        tile loop that holds it (the notify in its epilogue)."""
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; bar.sync 0; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def _notify_if(sig_ptr, slot, cond, count, SCOPE: tl.constexpr):
        """Where ``cond``: this thread's bulk stores complete, ``bar.sync 0``, then thread 0 release-adds ``count``
        to sig[slot] (``red``: no value comes back, so no barrier after it). One predicated statement: where ``cond``
        is false it costs a compare, and a loop holding it is still software-pipelined."""
        when = tl.cast(cond, tl.int32)
        at = tl.cast(sig_ptr + slot, tl.int64, bitcast=True)
        n = tl.cast(count, tl.int32)
        tl.inline_asm_elementwise(
            "{ .reg .pred p, q; .reg .u32 t; setp.ne.b32 p, $1, 0; @p cp.async.bulk.wait_group 0; @p bar.sync 0; "
            "mov.u32 t, %tid.x; setp.eq.and.u32 q, t, 0, p; @q red.release." + SCOPE + ".global.add.s32 [$2], $3; mov.b32 $0, 0; }",
            "=r,r,l,r",
            [when, at, n],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )

else:

    @triton.jit
    def ld_acquire_sys(ptr):
        """Load one int32 (interpreter: a volatile load; memory is read directly)."""
        return tl.load(ptr, volatile=True)

    @triton.jit
    def global_timer():
        """Nanoseconds of the host's monotonic clock (interpreter), after a short sleep that yields to other threads."""
        return _host_now_ns()

    @triton.jit
    def wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns):
        """Spin until sig[slot] reaches target, compared wrap-aware in int32; bounded by timeout_ns of host time.
        On timeout records (1, rank, slot, seen, target) in err_ptr and returns. Returns at once after a recorded
        timeout of this rank or an emulation abort. The result is the token.
        """
        v = ld_acquire_sys(sig_ptr + slot)
        t0 = global_timer()
        while (v - target) < 0:
            v = ld_acquire_sys(sig_ptr + slot)
            if (v - target) < 0:
                if _host_aborted() or tl.load(err_ptr, volatile=True) != 0:
                    v = target
                elif global_timer() - t0 > timeout_ns:
                    tl.atomic_xchg(err_ptr + 1, rank)
                    tl.atomic_xchg(err_ptr + 2, slot)
                    tl.atomic_xchg(err_ptr + 3, v)
                    tl.atomic_xchg(err_ptr + 4, target)
                    tl.atomic_xchg(err_ptr + 0, 1)
                    v = target
        return v

    @triton.jit
    def consume_token(x, token):
        """x, depending on token (interpreter: x + token * 0)."""
        return x + token * 0

    @triton.jit
    def _stores_done():
        """A barrier (interpreter: stores complete at once)."""
        tl.debug_barrier()

    @triton.jit
    def _notify_if(sig_ptr, slot, cond, count, SCOPE: tl.constexpr):
        """A barrier, then the release add of ``count`` where ``cond`` (interpreter: stores complete at once)."""
        tl.debug_barrier()
        tl.atomic_add(sig_ptr + slot, count, mask=cond, sem="release", scope=SCOPE)


@triton.jit
def load_epoch_target(epoch_ptr, arrivals):
    """This launch's wait target: epoch x arrivals in int32 (wrapping), the epoch read from the rank's epoch word."""
    return (tl.load(epoch_ptr) * arrivals).to(tl.int32)


@triton.jit
def _notify(sig_ptr, slot, mask, SCOPE: tl.constexpr):
    _stores_done()
    tl.atomic_add(sig_ptr + slot, 1, mask=mask, sem="release", scope=SCOPE)


@triton.jit
def notify_slot(sig_ptr, slot, mask=None):
    """Release-add 1 to this rank's sig[slot] at system scope, after this thread's TMA stores complete and every
    thread's stores; with a ``mask`` that is false, only the wait and the barrier (a tile that notifies nothing: no
    branch around the call, so a flattened tile loop holding it still compiles and pipelines)."""
    _notify(sig_ptr, slot, mask, "sys")


@triton.jit
def notify_slot_gpu(sig_ptr, slot, mask=None):
    """``notify_slot`` at gpu scope: for slots that only this device's kernels wait on and add to (they pass
    on what they read with their own system-scope releases); a slot a host stream or a peer waits on needs
    ``notify_slot``."""
    _notify(sig_ptr, slot, mask, "gpu")


@triton.jit
def notify_slot_if(sig_ptr, slot, cond, count):
    """Where ``cond`` holds, ``notify_slot(sig_ptr, slot)`` adding ``count`` (the tiles it notifies at once); where it
    does not, nothing but a compare (no wait, no barrier), so a K loop may hold it. ``cond`` must be the same on
    every thread of the program."""
    _notify_if(sig_ptr, slot, cond, count, "sys")


@triton.jit
def notify_slot_gpu_if(sig_ptr, slot, cond, count):
    """``notify_slot_if`` at gpu scope (``notify_slot_gpu``'s slots)."""
    _notify_if(sig_ptr, slot, cond, count, "gpu")


@triton.jit
def peer_notify(sig_ptrs, peer, slot, count=1):
    """Release-add ``count`` (default 1: one notify; a kernel may sum several into one add) to peer's
    sig[slot] (sig_ptrs: the signal buffer's peer-pointers table), after this thread's TMA stores complete
    and every thread's stores (as ``notify_slot``)."""
    sig = tl.load(sig_ptrs + peer).to(tl.pointer_type(tl.int32))
    _stores_done()
    tl.atomic_add(sig + slot, count, sem="release", scope="sys")


@triton.jit
def peer_notify_many(sig_ptrs, peers, slots, mask):
    """Release-add 1 to ``sig[slots[i]]`` of rank ``peers[i]`` for every ``i`` where ``mask`` holds (a block of
    segments at once, as a producer notifies the slabs its rows cover): one wait for this thread's TMA stores and
    one barrier, then the release adds of every segment in parallel."""
    ptrs = tl.load(sig_ptrs + peers, mask=mask, other=0).to(tl.pointer_type(tl.int32))
    _stores_done()
    tl.atomic_add(ptrs + slots, 1, mask=mask, sem="release", scope="sys")


@triton.jit
def peer_base(ptrs, peer, like_ptr):
    """Base pointer of peer's symmetric buffer from a peer-pointers table, of like_ptr's pointer type."""
    return tl.load(ptrs + peer).to(like_ptr.dtype)


@triton.jit
def peer_tile_load(ptrs, peer, like_ptr, offs, mask):
    """Load elements offs of peer's buffer (a tile_pull_data), typed like like_ptr."""
    return tl.load(peer_base(ptrs, peer, like_ptr) + offs, mask=mask)


@triton.jit
def peer_tile_store(ptrs, peer, like_ptr, offs, vals, mask):
    """Store vals at elements offs of peer's buffer (a tile_push_data), typed like like_ptr."""
    tl.store(peer_base(ptrs, peer, like_ptr) + offs, vals, mask=mask)
