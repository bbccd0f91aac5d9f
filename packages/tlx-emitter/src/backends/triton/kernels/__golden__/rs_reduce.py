"""rs-reduce: out = sum over ranks of the partial slabs delivered here, waiting per (rank, m-block).

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token


@triton.jit
def rs_reduce(part_ptr, own_ptr, out_ptr, sig_ptr, slot_ptr, err_ptr, N, rank, epoch_ptr, timeout_ns, rows_per_rank, WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
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
        tl.store(out_ptr + off, acc.to(tl.bfloat16), mask=mask)
