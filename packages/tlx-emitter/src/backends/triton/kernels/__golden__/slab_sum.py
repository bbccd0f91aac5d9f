"""slab-sum: per listed m-block, the sum of its contributions (own rows in place, staged rows after their signal); notify per summed tile.

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token, notify_slot


@triton.jit
def slab_sum(part_ptr, own_ptr, out_ptr, sig_ptr, slot_ptr, block_ptr, err_ptr, N, rank, epoch_ptr, timeout_ns, blocks, done_base, CONTRIB: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    target = load_epoch_target(epoch_ptr, 1)
    num_pn = tl.cdiv(N, BLOCK_N)
    block_elems = BLOCK_M * N
    for t in range(tl.program_id(0), blocks * num_pn, tl.num_programs(0)):
        i = t // num_pn
        pn = t % num_pn
        rows = tl.arange(0, BLOCK_M)
        cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = cols[None, :] < N
        off = rows[:, None] * N + cols[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in tl.static_range(CONTRIB):
            slot = tl.load(slot_ptr + k * blocks + i)
            base = (k * blocks + i) * block_elems
            src = part_ptr
            if slot < 0:
                base = tl.load(block_ptr + i) * block_elems
                src = own_ptr
            else:
                tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)
                base = consume_token(base, tok)
            blk = tl.multiple_of(src + base, 16)
            acc += tl.load(blk + off, mask=mask).to(tl.float32)
        dst = tl.multiple_of(out_ptr + i * block_elems, 16)
        tl.store(dst + off, acc.to(tl.bfloat16), mask=mask)
        if done_base >= 0:
            notify_slot(sig_ptr, done_base + i)
