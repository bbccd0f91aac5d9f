"""ar-tile-reduce: sum a tile's partials at the rank owning its rows and store the sum into every rank's output.

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token, peer_notify, peer_base


@triton.jit
def ar_tile_reduce(own_ptr, part_ptr, out_ptrs, sig_ptr, sig_ptrs, seg_ptr, num_segments, row_stride, slab_elems, done_at, err_ptr, rank, epoch_ptr, timeout_ns, WORLD: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    for seg in tl.range(tl.program_id(0), num_segments, tl.num_programs(0)):
        row = seg_ptr + seg * 8
        own_offset = tl.load(row + 0)
        part_offset = tl.load(row + 1)
        out_offset = tl.load(row + 2)
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
        own = tl.multiple_of(own_ptr + own_offset + zero, 16)
        part = part_ptr + part_offset + zero
        r = tl.arange(0, BLOCK_R)
        c = tl.arange(0, BLOCK_C)
        for r0 in range(0, rows, BLOCK_R):
            mask = ((r0 + r)[:, None] < rows) & (c[None, :] < cols)
            off = (r0 + r)[:, None] * row_stride + c[None, :]
            acc = tl.load(own + off, mask=mask).to(tl.float32)
            for p in tl.static_range(WORLD):
                if p != rank:
                    acc += tl.load(tl.multiple_of(part + p * slab_elems, 16) + off, mask=mask).to(tl.float32)
            total = acc.to(own_ptr.dtype.element_ty)
            for p in tl.static_range(WORLD):
                dst = tl.multiple_of(peer_base(out_ptrs, p, own_ptr) + out_offset, 16)
                tl.store(dst + off, total, mask=mask)
        if notify_at >= 0:
            for p in tl.static_range(WORLD):
                peer_notify(sig_ptrs, p, notify_at)
                peer_notify(sig_ptrs, p, done_at)
