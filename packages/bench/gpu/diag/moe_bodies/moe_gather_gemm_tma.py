"""Candidate: ovl's MoE gather + grouped GEMM body with the experts' weights loaded by TMA.

The same computation as packages/tlx-emitter/kernels/moe_gather_gemm.py; W [E, K, N] is read
through a rank-3 tensor descriptor (block [1, BLOCK_K, BLOCK_N], out-of-range rows and columns
zero-filled by the copy engine) instead of masked pointer loads; the gathered token rows stay
pointer loads (Hopper's TMA has no row gather).
"""
import triton
import triton.language as tl


# ovl: consumer gather=x_ptr rows=sorted_token_ids
@triton.jit
def moe_gather_gemm(
    x_ptr,
    w_ptr,
    c_ptr,
    sorted_token_ids,
    expert_of_block,
    num_blocks_ptr,
    M,
    N,
    K,
    E,
    TOP_K: tl.constexpr,
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
        # Row-major over (block, n-block): the n-blocks of one block reuse its gathered rows.
        pid_m = tile_id // num_pid_n  # ovl: tile m=pid_m
        pid_n = tile_id % num_pid_n
        expert = tl.load(expert_of_block + pid_m)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        slots = tl.load(sorted_token_ids + offs_m)
        valid = slots < M * TOP_K
        tokens = tl.where(valid, slots // TOP_K, 0).to(tl.int64)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = x_ptr + tokens[:, None] * K + offs_k[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < K - ki * BLOCK_K), other=0.0)
            b = w_desc.load([expert, ki * BLOCK_K, pid_n * BLOCK_N]).reshape(BLOCK_K, BLOCK_N)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + slots[:, None].to(tl.int64) * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < N))
