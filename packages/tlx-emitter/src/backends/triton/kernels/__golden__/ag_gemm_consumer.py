"""ag-gemm-consumer: C = A @ B over the gathered A, waiting per tile on the chunk slot of its rows.

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import wait_slot, consume_token


@triton.jit
def ag_gemm_consumer(a_ptr, b_ptr, c_ptr, order_ptr, slot_ptr, sig_ptr, err_ptr, M, N, K, rank, target, timeout_ns, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=False):
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        visit_m = first_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        pid_m = tl.load(order_ptr + visit_m)
        offs_am = pid_m * BLOCK_M
        slot = tl.load(slot_ptr + pid_m)
        if slot >= 0:
            tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)
            offs_am = consume_token(offs_am, tok)
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, offs_bn], acc.to(tl.bfloat16))
