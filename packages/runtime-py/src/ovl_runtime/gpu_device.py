"""Device code the runner itself launches: the bounded host-side ``rank_wait``.

A ``wait`` host op becomes a one-program kernel on its comm stream that spins with
``ld.global.acquire.sys`` until the slot reaches the target (wrap-aware), bounded by a
timeout; on timeout it records ``(1, rank, slot, seen, expected)`` in the error buffer and
returns, so a wrong schedule is an error, never a hung GPU; once any wait of the launch has
failed, later ones return at once. Imports triton: GPU mode only.
"""

import triton
import triton.language as tl


@triton.jit
def ld_acquire_sys(ptr):
    return tl.inline_asm_elementwise(
        "ld.global.acquire.sys.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def global_timer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


# slot and target change from op to op and launch to launch: one compiled variant for all,
# so that no module is loaded while another kernel spins (see notes/device.md).
@triton.jit(do_not_specialize=["slot", "target", "rank"])
def stream_wait_kernel(sig_ptr, slot, target, err_ptr, rank, timeout_ns):
    v = ld_acquire_sys(sig_ptr + slot)
    t0 = global_timer()
    while (v - target) < 0:
        v = ld_acquire_sys(sig_ptr + slot)
        if ld_acquire_sys(err_ptr) != 0:
            v = target  # a wait already failed this launch: report that one, do not pile up timeouts
        elif global_timer() - t0 > timeout_ns:
            tl.atomic_xchg(err_ptr + 1, rank)
            tl.atomic_xchg(err_ptr + 2, slot)
            tl.atomic_xchg(err_ptr + 3, v)
            tl.atomic_xchg(err_ptr + 4, target)
            tl.atomic_xchg(err_ptr + 0, 1)
            v = target
