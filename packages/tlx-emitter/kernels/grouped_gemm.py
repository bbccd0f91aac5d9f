"""ovl's built-in grouped GEMM body (MoE experts): C = A @ B[expert of the row], A [M, K], B [E, K, N], C [M, N].

A's rows are grouped contiguously by expert, each group padded to a multiple of BLOCK_M rows, so an
m-block belongs to one expert; group_of_mblock (int32, one entry per m-block) says which. A plain
Triton kernel: the `# ovl:` comments tell @ovl/tlx-emitter where a tile starts and that A is gathered.
"""
import triton
import triton.language as tl


# ovl: consumer gather=a_ptr
@triton.jit
def grouped_gemm(a_ptr, b_ptr, c_ptr, group_of_mblock, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0)):  # ovl: tile-loop
        # Row-major over (m-block, n-block): the n-blocks of one m-block run back to back.
        pid_m = tile_id // num_pid_n  # ovl: tile m=pid_m
        pid_n = tile_id % num_pid_n
        # Read after the tile statement, so it is the expert of the remapped m-block.
        expert = tl.load(group_of_mblock + pid_m).to(tl.int64)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
        b_ptrs = b_ptr + expert * K * N + offs_k[:, None] * N + offs_n[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            k_left = K - ki * BLOCK_K
            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
        c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
