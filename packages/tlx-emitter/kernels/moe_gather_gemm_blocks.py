"""ovl's non-persistent MoE gather + grouped GEMM body (TileLink's AG + Gather + GroupGEMM in the shape of
vLLM's fused_moe): C[t*k + j] = X[t] @ W[topk_ids[t, j]] for every token t and each of its k experts j.

The same computation and routing tables as moe_gather_gemm.py (X [M, K] the tokens, W [E, K, N], C [M*k, N]
in token-slot order; sorted_token_ids, expert_of_block and num_blocks_ptr from ovl_runtime.moe_align), but
one program per (block, n-block) tile over the routing's worst-case block count MAX_BLOCKS, in fused-MoE
order: GROUP_M blocks per n-block, so the n-blocks of neighbouring blocks share the expert's weight columns
in L2. A program whose block lies past the valid ones (known on the device only) exits before its tile
statement, so it neither waits nor reads; small tiles run several programs per SM and the last wave is
short. The `# ovl:` comments tell @ovl/tlx-emitter where the tile starts, that X is gathered, and that a
block's rows are read through sorted_token_ids.
"""
import triton
import triton.language as tl


# ovl: consumer gather=x_ptr rows=sorted_token_ids
@triton.jit
def moe_gather_gemm_blocks(
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
):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(MAX_BLOCKS - first_m, GROUP_M)
    block = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    # Blocks past the routing's valid ones (known on the device only) exit before their tile.
    if block >= tl.load(num_blocks_ptr):
        return
    pid_m = block  # ovl: tile m=pid_m
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
