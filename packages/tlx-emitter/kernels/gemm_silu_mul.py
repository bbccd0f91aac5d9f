"""ovl's built-in gate/up GEMM with the SiLU-and-multiply epilogue (an MLP's first half).

Y = silu(A @ W[:, :N]) * (A @ W[:, N:]), A [M, K], W [K, 2N] laid out as [gate | up], Y [M, N],
all row-major. Each tile computes both accumulators of the same n-tile (gate columns and the up
columns N further on) in fp32, applies silu in fp32 and stores the product in Y's element type.
A plain Triton kernel: the `# ovl:` comments tell @ovl/tlx-emitter where a tile starts and which
operand is gathered (A's row blocks arrive from other ranks), so it can insert the waits.
"""
import triton
import triton.language as tl


# ovl: consumer gather=a_ptr
@triton.jit
def gemm_silu_mul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    # W is [K, 2N]: gate columns [0, N), up columns [N, 2N).
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, 2 * N], strides=[2 * N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    out_dtype = c_ptr.dtype.element_ty
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=False):  # ovl: tile-loop
        # Grouped order: GROUP_M row blocks share their W column blocks in L2.
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        pid_m = first_m + (tile_id % group_size_m)  # ovl: tile m=pid_m
        offs_am = pid_m * BLOCK_M
        offs_gate = pid_n * BLOCK_N
        offs_up = N + pid_n * BLOCK_N
        gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            gate = tl.dot(a, b_desc.load([offs_k, offs_gate]), gate)
            up = tl.dot(a, b_desc.load([offs_k, offs_up]), up)
        # silu(g) = g * sigmoid(g), in fp32; one rounding at the store.
        y = gate * tl.sigmoid(gate) * up
        c_desc.store([offs_am, offs_gate], y.to(out_dtype))
