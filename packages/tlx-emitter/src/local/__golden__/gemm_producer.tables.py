"""gemm_producer: producer kernel with ovl's tile-boundary notifies.

Emitted by @ovl/tlx-emitter from gemm_producer.py (gemm_producer); edit the source kernel, not this file."""
import triton
import triton.language as tl
from ovl_runtime.language import notify_slot


@triton.jit
def gemm_producer(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, ovl_order, ovl_notify0, ovl_notify1, ovl_sig_ptr, ovl_rank):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=False):  # ovl: tile-loop
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        pid_m, pid_n = first_m + (tile_id % group_size_m), (tile_id % num_pid_in_group) // group_size_m  # ovl: tile m=pid_m n=pid_n
        ovl_t = pid_m * 4 + pid_n
        ovl_t2 = tl.load(ovl_order + (ovl_t))
        pid_m = ovl_t2 // 4
        pid_n = ovl_t2 % 4
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([pid_m * BLOCK_M, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        # Masked pointer stores: the output may be a strided view or not TMA-aligned.
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = offs_bn + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)
        ovl_slot0 = tl.load(ovl_notify0 + (ovl_t2))
        notify_slot(ovl_sig_ptr, ovl_slot0, ovl_slot0 >= 0)
        ovl_slot1 = tl.load(ovl_notify1 + (ovl_t2))
        notify_slot(ovl_sig_ptr, ovl_slot1, ovl_slot1 >= 0)
