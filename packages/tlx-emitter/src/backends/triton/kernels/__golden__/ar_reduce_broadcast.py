"""ar-reduce-broadcast: this rank's rows of every rank's output = sum over ranks of the delivered partial slabs; notify every peer once per program.

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token, peer_notify, peer_base


@triton.jit
def ar_reduce_broadcast(part_ptr, own_ptr, out_ptrs, sig_ptr, sig_ptrs, slot_ptr, err_ptr, N, rank, epoch_ptr, timeout_ns, rows_per_rank, recv_base, WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    slab_rows = rank * rows_per_rank * N
    stored = rank * 0
    blocks_per_slab = rows_per_rank // BLOCK_M
    target = load_epoch_target(epoch_ptr, 1)
    num_pn = tl.cdiv(N, BLOCK_N)
    for t in range(tl.program_id(0), blocks_per_slab * num_pn, tl.num_programs(0)):
        mb = t // num_pn
        pn = t % num_pn
        rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = cols[None, :] < N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        off = rows[:, None] * N + cols[None, :]
        for p in tl.static_range(WORLD):
            slab_off = p * rows_per_rank * N
            src = part_ptr
            if p == rank:
                src = own_ptr
            else:
                slot = tl.load(slot_ptr + p * blocks_per_slab + mb)
                tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)
                slab_off = consume_token(slab_off, tok)
            slab = tl.multiple_of(src + slab_off, 16)
            acc += tl.load(slab + off, mask=mask).to(tl.float32)
        total = acc.to(tl.bfloat16)
        for p in tl.static_range(WORLD):
            dst = tl.multiple_of(peer_base(out_ptrs, p, own_ptr) + slab_rows, 16)
            tl.store(dst + off, total, mask=mask)
        stored += 1
    for p in tl.static_range(WORLD):
        if p != rank:
            peer_notify(sig_ptrs, p, recv_base + rank, stored)
