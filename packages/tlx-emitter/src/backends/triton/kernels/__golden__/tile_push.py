"""tile-push: copy a finished tile into the rank that owns its rows, then notify that rank.

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token, peer_notify, peer_base


@triton.jit
def tile_push(src_ptr, dst_ptrs, sig_ptr, sig_ptrs, seg_ptr, num_segments, row_stride, err_ptr, rank, epoch_ptr, timeout_ns, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    for seg in tl.range(tl.program_id(0), num_segments, tl.num_programs(0)):
        row = seg_ptr + seg * 8
        src_offset = tl.load(row + 0)
        dst_rank = tl.load(row + 1)
        dst_offset = tl.load(row + 2)
        rows = tl.load(row + 3)
        cols = tl.load(row + 4)
        wait_at = tl.load(row + 5)
        wait_arrivals = tl.load(row + 6)
        notify_at = tl.load(row + 7)
        zero = rank * 0
        if wait_at >= 0:
            target = load_epoch_target(epoch_ptr, wait_arrivals)
            tok = wait_slot(sig_ptr, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)
            zero = consume_token(wait_at.to(tl.int32) * 0, tok)
        src = tl.multiple_of(src_ptr + src_offset + zero, 16)
        dst = tl.multiple_of(peer_base(dst_ptrs, dst_rank, src_ptr) + dst_offset, 16)
        r = tl.arange(0, BLOCK_R)
        c = tl.arange(0, BLOCK_C)
        for r0 in range(0, rows, BLOCK_R):
            mask = ((r0 + r)[:, None] < rows) & (c[None, :] < cols)
            off = (r0 + r)[:, None] * row_stride + c[None, :]
            tl.store(dst + off, tl.load(src + off, mask=mask), mask=mask)
        if notify_at >= 0:
            peer_notify(sig_ptrs, dst_rank, notify_at)
