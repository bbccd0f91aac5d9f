"""Candidate: ovl's MoE grouped GEMM + scatter body with the experts' weights loaded by TMA.

The same computation as packages/tlx-emitter/kernels/moe_gemm_scatter.py; W [E, K, N] is read
through a rank-3 tensor descriptor (block [1, BLOCK_K, BLOCK_N], out-of-range rows and columns
zero-filled) instead of masked pointer loads.
"""
import triton
import triton.language as tl


# ovl: producer scatter=partial_ptr rows=sorted_token_ids
@triton.jit
def moe_gemm_scatter(
    h_ptr,
    w_ptr,
    topk_weights,
    partial_ptr,
    sorted_token_ids,
    expert_of_block,
    num_blocks_ptr,
    N,
    K,
    E,
    SLOTS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E, K, N], strides=[K * N, N, 1], block_shape=[1, BLOCK_K, BLOCK_N])
    # Only the valid blocks are tiles; how many there are is known on the device only.
    num_tiles = tl.load(num_blocks_ptr) * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS):  # ovl: tile-loop
        # Row-major over (block, n-block): the n-blocks of one block reuse its rows of h.
        pid_m, pid_n = tile_id // num_pid_n, tile_id % num_pid_n  # ovl: tile m=pid_m n=pid_n
        expert = tl.load(expert_of_block + pid_m)
        slots = tl.load(sorted_token_ids + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
        valid = slots < SLOTS
        rows = tl.where(valid, slots, 0).to(tl.int64)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = h_ptr + rows[:, None] * K + offs_k[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < K - ki * BLOCK_K), other=0.0)
            b = w_desc.load([expert, ki * BLOCK_K, pid_n * BLOCK_N]).reshape(BLOCK_K, BLOCK_N)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
        # Each slot's row scaled by its routing weight, stored at its slot position.
        acc = acc * tl.load(topk_weights + rows, mask=valid, other=0.0).to(tl.float32)[:, None]
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = partial_ptr + rows[:, None] * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(partial_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < N))
