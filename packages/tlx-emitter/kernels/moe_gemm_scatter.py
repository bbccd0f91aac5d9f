"""ovl's built-in MoE grouped GEMM + scatter body (TileLink's MoE part 2, vLLM's fused_moe down projection):
partial[t*k + j] = topk_weights[t, j] * (h[t*k + j] @ W[topk_ids[t, j]]) for every token t and each of its k experts j.

h [T*k, K] holds one row per token slot t*k + j (part 1's activations), W [E, K, N] the experts' weights,
partial [T*k, N] the weighted rows at their slot positions (the scatter); summing a token's k rows (the
TopK-reduce) and the ranks' partials (the ReduceScatter) is the operator's reducer. The routing tables come
from the device (ovl_runtime.moe_align): sorted_token_ids lists the slots grouped by expert, each expert's
group padded to a multiple of BLOCK_M with the sentinel T*k, expert_of_block the expert of each block and
num_blocks_ptr[0] the number of valid blocks. A plain Triton kernel: the `# ovl:` comments tell
@ovl/tlx-emitter where a tile starts, that partial is scattered, and that a block's rows are written
through sorted_token_ids, so it can notify the slabs those rows fall in after the tile's stores.
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
    SLOTS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Only the valid blocks are tiles; how many there are is known on the device only.
    num_tiles = tl.load(num_blocks_ptr) * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS):  # ovl: tile-loop
        # Row-major over (block, n-block): the n-blocks of one block reuse its rows of h.
        pid_m, pid_n = tile_id // num_pid_n, tile_id % num_pid_n  # ovl: tile m=pid_m n=pid_n
        expert = tl.load(expert_of_block + pid_m).to(tl.int64)
        slots = tl.load(sorted_token_ids + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
        valid = slots < SLOTS
        rows = tl.where(valid, slots, 0).to(tl.int64)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = h_ptr + rows[:, None] * K + offs_k[None, :]
        b_ptrs = w_ptr + expert * K * N + offs_k[:, None] * N + offs_n[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            k_left = K - ki * BLOCK_K
            a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
        # Each slot's row scaled by its routing weight, stored at its slot position.
        acc = acc * tl.load(topk_weights + rows, mask=valid, other=0.0).to(tl.float32)[:, None]
        c_ptrs = partial_ptr + rows[:, None] * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(partial_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < N))
