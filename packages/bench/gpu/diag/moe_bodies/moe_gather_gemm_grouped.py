"""A variant of ovl's built-in MoE gather + grouped GEMM body (tiles grouped along M, weight columns wrapped modulo N) (TileLink's AG + Gather + GroupGEMM, vLLM's fused_moe):
C[t*k + j] = X[t] @ W[topk_ids[t, j]] for every token t and each of its k experts j.

X [M, K] holds the tokens (M of them), W [E, K, N] the experts' weights, C [M*k, N] one row per
token slot t*k + j. The routing tables come from the device (ovl_runtime.moe_align):
sorted_token_ids lists the slots grouped by expert, each expert's group padded to a multiple of
BLOCK_M with the sentinel M*k, expert_of_block the expert of each block of BLOCK_M entries, and
num_blocks_ptr[0] the number of valid blocks. A plain Triton kernel: the `# ovl:` comments tell
@ovl/tlx-emitter where a tile starts, that X is gathered, and that a block's rows are read
through sorted_token_ids.
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
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
    GROUP_M: tl.constexpr = 16,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Only the valid blocks are tiles; how many there are is known on the device only.
    num_blocks = tl.load(num_blocks_ptr)
    num_tiles = num_blocks * num_pid_n
    in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS):  # ovl: tile-loop
        # Grouped: GROUP_M blocks in turn per n-block, so an n-block's weight columns are reused.
        first_m = (tile_id // in_group) * GROUP_M
        group_m = tl.minimum(num_blocks - first_m, GROUP_M)
        pid_m = first_m + (tile_id % in_group) % group_m  # ovl: tile m=pid_m
        pid_n = (tile_id % in_group) // group_m
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
        for ki in range(k_tiles):
            k_left = K - ki * BLOCK_K
            a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
        c_ptrs = c_ptr + slots[:, None].to(tl.int64) * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < N))
