"""ovl's warp-specialised MoE grouped GEMM + scatter body (TileLink's MoE part 2): the computation of
moe_gemm_scatter.py, partial[t*k + j] = topk_weights[t, j] * (h[t*k + j] @ W[topk_ids[t, j]]), with the rows of
h read in the routing's block order and the tile loop warp-specialised by Triton.

h_blocks [MAX_BLOCKS*BLOCK_M, K] holds the slot rows in the order of sorted_token_ids (row m*BLOCK_M + i is slot
sorted_token_ids[m*BLOCK_M + i]; `blocks=` tells ovl, which fills it from h in slot order when the rows come so),
so a block's rows are contiguous and load through a tensor descriptor, as do the experts' weights W [E, K, N]
(zero-filled past K and N). `warp_specialize=True` lets Triton split the tile loop into a TMA producer partition
that runs ahead, across tiles, of two MMA + epilogue partitions: the next tile's loads overlap this tile's
scattered stores, which matters at MoE part 2's short K (I / world). Such a loop takes no inserted notifies, so
its operator signals its slabs once per launch, after the kernel.
"""
import triton
import triton.language as tl


# ovl: producer scatter=partial_ptr rows=sorted_token_ids blocks=h_blocks
@triton.jit
def moe_gemm_scatter_ws(
    h_blocks,
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
    MAX_BLOCKS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    h_desc = tl.make_tensor_descriptor(h_blocks, shape=[MAX_BLOCKS * BLOCK_M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E, K, N], strides=[K * N, N, 1], block_shape=[1, BLOCK_K, BLOCK_N])
    # Only the valid blocks are tiles; how many there are is known on the device only.
    num_tiles = tl.load(num_blocks_ptr) * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, warp_specialize=True):  # ovl: tile-loop
        # Row-major over (block, n-block): the n-blocks of one block reuse its rows of h.
        pid_m, pid_n = tile_id // num_pid_n, tile_id % num_pid_n  # ovl: tile m=pid_m n=pid_n
        expert = tl.load(expert_of_block + pid_m)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = h_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = w_desc.load([expert, ki * BLOCK_K, pid_n * BLOCK_N]).reshape(BLOCK_K, BLOCK_N)
            acc = tl.dot(a, b, acc)
        # Each slot's row scaled by its routing weight, stored at its slot position.
        slots = tl.load(sorted_token_ids + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
        valid = slots < SLOTS
        rows = tl.where(valid, slots, 0).to(tl.int64)
        acc = acc * tl.load(topk_weights + rows, mask=valid, other=0.0).to(tl.float32)[:, None]
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = partial_ptr + rows[:, None] * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(partial_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < N))
