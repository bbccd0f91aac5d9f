"""ring-reduce: reduce a received chunk into the local accumulator and forward it.

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token, notify_slot, peer_notify, peer_base


@triton.jit
def ring_reduce(recv_ptr, acc_ptr, recv_ptrs, sig_ptr, sig_ptrs, seg_ptr, num_segments, err_ptr, rank, epoch_ptr, timeout_ns, BLOCK: tl.constexpr):
    for seg in tl.range(tl.program_id(0), num_segments, tl.num_programs(0)):
        row = seg_ptr + seg * 8
        recv_offset = tl.load(row + 0)
        acc_offset = tl.load(row + 1)
        length = tl.load(row + 2)
        wait_at = tl.load(row + 3)
        wait_arrivals = tl.load(row + 4)
        fwd_rank = tl.load(row + 5)
        fwd_offset = tl.load(row + 6)
        notify_at = tl.load(row + 7)
        zero = rank * 0
        if wait_at >= 0:
            target = load_epoch_target(epoch_ptr, wait_arrivals)
            tok = wait_slot(sig_ptr, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)
            zero = consume_token(wait_at.to(tl.int32) * 0, tok)
        offs = tl.arange(0, BLOCK)
        fwd_base = acc_ptr
        if fwd_rank >= 0:
            fwd_base = peer_base(recv_ptrs, fwd_rank, recv_ptr) + fwd_offset
        whole = length - length % BLOCK
        for i in range(0, whole, BLOCK):
            recv = tl.multiple_of(recv_ptr + recv_offset + zero + i, 16)
            acc = tl.multiple_of(acc_ptr + acc_offset + i, 16)
            fwd = tl.multiple_of(fwd_base + i, 16)
            got = tl.load(recv + offs, mask=None).to(tl.float32)
            mine = tl.load(acc + offs, mask=None).to(tl.float32)
            total = (got + mine).to(acc_ptr.dtype.element_ty)
            tl.store(acc + offs, total, mask=None)
            if fwd_rank >= 0:
                tl.store(fwd + offs, total, mask=None)
        if whole < length:
            recv = recv_ptr + recv_offset + zero + whole
            acc = acc_ptr + acc_offset + whole
            fwd = fwd_base + whole
            m = offs < length - whole
            got = tl.load(recv + offs, mask=m).to(tl.float32)
            mine = tl.load(acc + offs, mask=m).to(tl.float32)
            total = (got + mine).to(acc_ptr.dtype.element_ty)
            tl.store(acc + offs, total, mask=m)
            if fwd_rank >= 0:
                tl.store(fwd + offs, total, mask=m)
        if notify_at >= 0:
            if fwd_rank >= 0:
                peer_notify(sig_ptrs, fwd_rank, notify_at)
            else:
                notify_slot(sig_ptr, notify_at)
