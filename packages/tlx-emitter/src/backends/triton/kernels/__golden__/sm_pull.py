"""sm-pull: wait on a peer's slot, copy its segment here, then notify a local slot.

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token, notify_slot, peer_base


@triton.jit
def sm_pull(src_ptrs, dst_ptr, sig_ptr, sig_ptrs, seg_ptr, num_segments, err_ptr, rank, epoch_ptr, timeout_ns, BLOCK: tl.constexpr):
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
            target = load_epoch_target(epoch_ptr, wait_arrivals)
            tok = wait_slot(peer_sig, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)
            zero = consume_token(wait_at.to(tl.int32) * 0, tok)
        offs = tl.arange(0, BLOCK)
        whole = length - length % BLOCK
        for i in range(0, whole, BLOCK):
            src = tl.multiple_of(peer_base(src_ptrs, src_rank, dst_ptr) + src_offset + zero + i, 16)
            dst = tl.multiple_of(dst_ptr + dst_offset + i, 16)
            tl.store(dst + offs, tl.load(src + offs, mask=None), mask=None)
        if whole < length:
            src = peer_base(src_ptrs, src_rank, dst_ptr) + src_offset + zero + whole
            dst = dst_ptr + dst_offset + whole
            m = offs < length - whole
            tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)
        if notify_at >= 0:
            notify_slot(sig_ptr, notify_at)
