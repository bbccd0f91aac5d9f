"""grouped_gemm: consumer kernel with ovl's tile-boundary waits.

Emitted by @ovl/tlx-emitter from grouped_gemm.py (grouped_gemm); edit the source kernel, not this file."""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token


@triton.jit
def grouped_gemm(a_ptr, b_ptr, c_ptr, group_of_mblock, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ovl_order, ovl_wait0, rank_off, ovl_sig_ptr, ovl_err_ptr, ovl_rank, ovl_epoch_ptr, ovl_timeout_ns):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    ovl_target = load_epoch_target(ovl_epoch_ptr, 1)
    ovl_waited = 0
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0)):  # ovl: tile-loop
        # Row-major over (m-block, n-block): the n-blocks of one m-block run back to back.
        pid_m = tile_id // num_pid_n  # ovl: tile m=pid_m
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
