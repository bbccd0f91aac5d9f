"""Candidate: MoE part 2's grouped GEMM + scatter reading h in the routing's block order.

h_sorted [PADDED, K] holds the slot rows in the order of sorted_token_ids (row p is slot
sorted_token_ids[p]; padding rows zero), so each block's A rows are contiguous and load through a
tensor descriptor, as do the experts' weights (W [E, K, N] viewed as [E·K, N]; K a multiple of
BLOCK_K). With WS the tile loop is warp-specialised by Triton (a TMA producer partition runs ahead
of the MMA + epilogue partitions, across tiles). Epilogue: the rows weighted and scattered to their
slot positions of partial [SLOTS, N] (SORTED_OUT false), or stored by TMA at their block position
of partial [PADDED, N] (SORTED_OUT true). NOTIFY: after the stores, a barrier and a release add to
sig[s] for every slab s the block's tokens cover (the moe-rs producer's notify, local here).
"""

import triton
import triton.language as tl


@triton.jit
def moe_sorted_gemm_scatter(
    h_ptr,
    w_ptr,
    topk_weights,
    partial_ptr,
    sorted_token_ids,
    expert_of_block,
    num_blocks_ptr,
    sig_ptr,
    N,
    K,
    E,
    SLOTS,
    PADDED,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
    WS: tl.constexpr,
    SORTED_OUT: tl.constexpr,
    NOTIFY: tl.constexpr,
    TOP_K: tl.constexpr,
    SLAB_T: tl.constexpr,
    SLABS: tl.constexpr,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    h_desc = tl.make_tensor_descriptor(h_ptr, shape=[PADDED, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E * K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(partial_ptr, shape=[PADDED, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_tiles = tl.load(num_blocks_ptr) * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, warp_specialize=WS):
        pid_m = tile_id // num_pid_n
        pid_n = tile_id % num_pid_n
        expert = tl.load(expert_of_block + pid_m)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = h_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = w_desc.load([expert * K + ki * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        slots = tl.load(sorted_token_ids + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
        valid = slots < SLOTS
        rows = tl.where(valid, slots, 0).to(tl.int64)
        acc = acc * tl.load(topk_weights + rows, mask=valid, other=0.0)[:, None]
        if SORTED_OUT:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(partial_ptr.dtype.element_ty))
        else:
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            tl.store(
                partial_ptr + rows[:, None] * N + offs_n[None, :],
                acc.to(partial_ptr.dtype.element_ty),
                mask=valid[:, None] & (offs_n[None, :] < N),
            )
        if NOTIFY:
            lo = tl.min(tl.where(valid, slots, SLOTS), axis=0) // TOP_K // SLAB_T
            hi = tl.max(tl.where(valid, slots, 0), axis=0) // TOP_K // SLAB_T
            s = lo + tl.arange(0, SLABS)
            tl.debug_barrier()
            tl.atomic_add(sig_ptr + s, 1, mask=(s <= hi) & (lo < SLABS), sem="release", scope="sys")
