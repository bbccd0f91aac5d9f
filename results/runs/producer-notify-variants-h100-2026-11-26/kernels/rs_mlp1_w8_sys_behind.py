"""gemm_producer_tma_flat: producer kernel with ovl's tile-boundary notifies.

Emitted by @ovl/tlx-emitter from gemm_producer_tma_flat.py (gemm_producer_tma_flat); edit the source kernel, not this file."""
import triton
import triton.language as tl
from ovl_runtime.language import notify_slot, notify_slot_behind


@triton.jit
def gemm_producer_tma_flat(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, ovl_notify0, ovl_sig_ptr, ovl_rank):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N // 2])
    out_dtype = c_ptr.dtype.element_ty
    num_pid_in_group = GROUP_M * num_pid_n
    ovl_prev0 = tl.zeros((), tl.int32) - 1
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=True):  # ovl: tile-loop
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        pid_m, pid_n = first_m + (tile_id % group_size_m), (tile_id % num_pid_in_group) // group_size_m  # ovl: tile m=pid_m n=pid_n
        ovl_t = pid_m * 16 + pid_n
        ovl_t2 = (128 * ovl_rank + ovl_t + 128) % 1024
        pid_m = ovl_t2 // 16
        pid_n = ovl_t2 % 16
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([offs_am, offs_bn], left.to(out_dtype))
        c_desc.store([offs_am, offs_bn + BLOCK_N // 2], right.to(out_dtype))
        ovl_slot0 = tl.load(ovl_notify0 + (ovl_t2))
        notify_slot_behind(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0, 2)
        ovl_prev0 = ovl_slot0
    notify_slot(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0)
