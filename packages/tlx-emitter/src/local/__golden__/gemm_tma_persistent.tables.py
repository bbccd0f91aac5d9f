"""gemm_tma_persistent: consumer kernel with ovl's tile-boundary waits.

Emitted by @ovl/tlx-emitter from gemm_tma_persistent.py (gemm_tma_persistent); edit the source kernel, not this file."""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token


@triton.jit
def gemm_tma_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, ovl_order, ovl_wait0, rank_off, ovl_sig_ptr, ovl_err_ptr, ovl_rank, ovl_epoch_ptr, ovl_timeout_ns):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    # One body serves bf16, fp16 and fp32 outputs: the store converts to C's element type.
    out_dtype = c_ptr.dtype.element_ty
    num_pid_in_group = GROUP_M * num_pid_n
    ovl_target = load_epoch_target(ovl_epoch_ptr, 1)
    ovl_waited = 0
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=False):  # ovl: tile-loop
        # Grouped order: GROUP_M row blocks share their B column blocks in L2.
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        pid_m = first_m + (tile_id % group_size_m)  # ovl: tile m=pid_m
        ovl_m = pid_m
        pid_m = tl.load(ovl_order + (ovl_m))
        ovl_mb = pid_m
        ovl_slot0 = tl.load(ovl_wait0 + (ovl_mb))
        ovl_bit0 = tl.where(ovl_slot0 < 32, tl.full([], 1, tl.int32) << (ovl_slot0 & 31), 0)
        if (ovl_slot0 >= 0) & ((ovl_waited & ovl_bit0) == 0):
            ovl_tok = wait_slot(ovl_sig_ptr, ovl_slot0, ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)
            pid_m = consume_token(pid_m, ovl_tok)
            ovl_waited = ovl_waited | ovl_bit0
        ovl_slot1 = (ovl_mb * 2 + rank_off) % 16
        ovl_bit1 = tl.where(ovl_slot1 < 32, tl.full([], 1, tl.int32) << (ovl_slot1 & 31), 0)
        if (ovl_slot1 >= 0) & ((ovl_waited & ovl_bit1) == 0):
            ovl_tok = wait_slot(ovl_sig_ptr, ovl_slot1, ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)
            pid_m = consume_token(pid_m, ovl_tok)
            ovl_waited = ovl_waited | ovl_bit1
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        c_desc.store([offs_am, offs_bn], acc.to(out_dtype))
