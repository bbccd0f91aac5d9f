"""sm-pull: wait on a peer's slot, copy its segment here, then notify a local slot.

Emitted by @ovl/tlx-emitter. Device primitives first, then the kernel.
"""
import triton
import triton.language as tl


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
def notify_slot(sig_ptr, slot):
    """Release-add 1 to this rank's sig[slot] at system scope, after every thread's stores."""
    tl.debug_barrier()
    tl.atomic_add(sig_ptr + slot, 1, sem="release", scope="sys")


@triton.jit
def peer_notify(sig_ptrs, peer, slot):
    """Release-add 1 to peer's sig[slot] (sig_ptrs: the signal buffer's peer-pointers table)."""
    sig = tl.load(sig_ptrs + peer).to(tl.pointer_type(tl.int32))
    tl.debug_barrier()
    tl.atomic_add(sig + slot, 1, sem="release", scope="sys")


@triton.jit
def peer_base(ptrs, peer):
    """Base pointer of peer's symmetric buffer (elements of bf16) from a peer-pointers table."""
    return tl.load(ptrs + peer).to(tl.pointer_type(tl.bfloat16))


@triton.jit
def peer_tile_load(ptrs, peer, offs, mask):
    """Load elements offs of peer's buffer (a tile_pull_data)."""
    return tl.load(peer_base(ptrs, peer) + offs, mask=mask)


@triton.jit
def peer_tile_store(ptrs, peer, offs, vals, mask):
    """Store vals at elements offs of peer's buffer (a tile_push_data)."""
    tl.store(peer_base(ptrs, peer) + offs, vals, mask=mask)


@triton.jit
def sm_pull(src_ptrs, dst_ptr, sig_ptr, sig_ptrs, seg_ptr, num_segments, err_ptr, rank, epoch, timeout_ns, BLOCK: tl.constexpr):
    for seg in tl.range(tl.program_id(0), num_segments, tl.num_programs(0)):
        row = seg_ptr + seg * 7
        src_rank = tl.load(row + 0)
        src_offset = tl.load(row + 1)
        dst_offset = tl.load(row + 2)
        length = tl.load(row + 3)
        wait_at = tl.load(row + 4)
        wait_arrivals = tl.load(row + 5)
        notify_at = tl.load(row + 6)
        peer_sig = tl.load(sig_ptrs + src_rank).to(tl.pointer_type(tl.int32))
        zero = rank * 0
        if wait_at >= 0:
            target = (epoch * wait_arrivals).to(tl.int32)
            tok = wait_slot(peer_sig, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)
            zero = consume_token(wait_at.to(tl.int32) * 0, tok)
        offs = tl.arange(0, BLOCK)
        whole = length - length % BLOCK
        for i in range(0, whole, BLOCK):
            src = tl.multiple_of(peer_base(src_ptrs, src_rank) + src_offset + zero + i, 16)
            dst = tl.multiple_of(dst_ptr + dst_offset + i, 16)
            tl.store(dst + offs, tl.load(src + offs, mask=None), mask=None)
        if whole < length:
            src = peer_base(src_ptrs, src_rank) + src_offset + zero + whole
            dst = dst_ptr + dst_offset + whole
            m = offs < length - whole
            tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)
        if notify_at >= 0:
            notify_slot(sig_ptr, notify_at)
