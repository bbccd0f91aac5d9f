"""Diagnostic variant of kernels/moe_gather_gemm_blocks.py with a grid-stride tile loop: the same tiles in the
same fused-MoE order (GROUP_M blocks per n-block, over the valid blocks only), taken by NUM_SMS programs in
turn, so any grid is correct (one tile per program when the grid covers every tile).
"""
import triton
import triton.language as tl


# ovl: consumer gather=x_ptr rows=sorted_token_ids
@triton.jit
def moe_gather_gemm_loop(
    x_ptr,
    w_ptr,
    c_ptr,
    sorted_token_ids,
    expert_of_block,
    num_blocks_ptr,
    M,
    N,
    K,
    MAX_BLOCKS,
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    num_blocks = tl.load(num_blocks_ptr)
    for tile in tl.range(tl.program_id(0), num_blocks * num_pid_n, NUM_SMS):  # ovl: tile-loop
        first_m = (tile // in_group) * GROUP_M
        group_m = min(num_blocks - first_m, GROUP_M)
        pid_m = first_m + (tile % in_group) % group_m  # ovl: tile m=pid_m
        pid_n = (tile % in_group) // group_m
        expert = tl.load(expert_of_block + pid_m).to(tl.int64)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        slots = tl.load(sorted_token_ids + offs_m)
        valid = slots < M * TOP_K
        tokens = tl.where(valid, slots // TOP_K, 0).to(tl.int64)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = x_ptr + tokens[:, None] * K + offs_k[None, :]
        b_ptrs = w_ptr + expert * K * N + offs_k[:, None] * N + (offs_n % N)[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BLOCK_K)):
            k_left = K - ki * BLOCK_K
            a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
        c_ptrs = c_ptr + slots[:, None].to(tl.int64) * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < N))
