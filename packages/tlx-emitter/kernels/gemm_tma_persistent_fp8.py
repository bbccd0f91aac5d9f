"""ovl's built-in persistent TMA GEMM body for fp8 e4m3 operands, scaled per tensor:
C = (A @ B) * scale_a * scale_b, A [M, K] row-major, B given as its transpose Bt [N, K] row-major
(B column-major, as torch._scaled_mm takes its second operand), scale_a and scale_b one float32
each (read from device memory at every launch), C [M, N] row-major in C's type (bf16).

The same tile loop as gemm_tma_persistent.py. Hopper's wgmma takes 8-bit operands K-major only, so
B's tiles are loaded as [BLOCK_N, BLOCK_K] blocks of Bt and transposed in the dot (Triton's
persistent-matmul tutorial loads fp8 B the same way). The products accumulate in float32; the
scales are applied once per tile in the epilogue, before the one rounding to C's type.
"""
import triton
import triton.language as tl


# ovl: consumer gather=a_ptr
@triton.jit
def gemm_tma_persistent_fp8(a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    bt_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    out_dtype = c_ptr.dtype.element_ty
    # Per-tensor scales: one product, applied to every tile's float32 accumulator.
    scale = tl.load(scale_a_ptr) * tl.load(scale_b_ptr)
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=False):  # ovl: tile-loop
        # Grouped order: GROUP_M row blocks share their B column blocks in L2.
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        pid_m = first_m + (tile_id % group_size_m)  # ovl: tile m=pid_m
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            bt = bt_desc.load([offs_bn, offs_k])
            acc = tl.dot(a, bt.T, acc)
        c_desc.store([offs_am, offs_bn], (acc * scale).to(out_dtype))
