"""tlx-gemm: C = A @ B, warp-specialised (TMA producer, replicated wgmma consumers).

Emitted by @ovl/tlx-emitter (TLX, warp-specialised). The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def tlx_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_CONSUMERS: tl.constexpr, GROUP_M: tl.constexpr):
    SPLIT_M: tl.constexpr = BLOCK_M // NUM_CONSUMERS
    HALF_N: tl.constexpr = BLOCK_N // 2
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[SPLIT_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, HALF_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, BLOCK_N])
    a_ring = tlx.local_alloc((SPLIT_M, BLOCK_K), tl.bfloat16, NUM_STAGES * NUM_CONSUMERS)
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.bfloat16, NUM_STAGES)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_CONSUMERS)
    # cta_bars[s]: both CTAs of the cluster have freed ring slot s (the B half each multicasts lands in both).
    cta_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pairs_m = tl.cdiv(num_pid_m, 2)
    num_pairs = num_pairs_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            cta = tlx.cluster_cta_rank()
            it = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for pair in range(tl.program_id(0) // 2, num_pairs, tl.num_programs(0) // 2):
                first_m = (pair // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pairs_m - first_m, GROUP_M)
                pair_m = first_m + (pair % group_size_m)
                pid_n = (pair % num_pid_in_group) // group_size_m
                pid_m = 2 * pair_m + cta
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                for ki in range(k_tiles):
                    stage = it % NUM_STAGES
                    phase = (it // NUM_STAGES) & 1
                    tlx.barrier_wait(tlx.local_view(empty_bars, stage), phase ^ 1)
                    full = tlx.local_view(full_bars, stage)
                    tlx.barrier_expect_bytes(full, 49152)
                    for c in tl.static_range(NUM_CONSUMERS):
                        tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, stage * NUM_CONSUMERS + c), [offs_am + c * SPLIT_M, ki * BLOCK_K], full)
                    cta_bar = tlx.local_view(cta_bars, stage)
                    tlx.barrier_arrive(cta_bar, 1)
                    tlx.barrier_arrive(cta_bar, 1, remote_cta_rank=cta ^ 1)
                    tlx.barrier_wait(cta_bar, phase)
                    b_slot = tlx.local_view(b_ring, stage)
                    if cta == 0:
                        b_half = tlx.local_slice(b_slot, [0, 0], [BLOCK_K, HALF_N])
                    else:
                        b_half = tlx.local_slice(b_slot, [0, HALF_N], [BLOCK_K, HALF_N])
                    tlx.async_descriptor_load(b_desc, b_half, [ki * BLOCK_K, offs_bn + cta * HALF_N], full, multicast_targets=[cta, cta ^ 1])
                    it += 1
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            cid: tl.constexpr = tlx.async_task_replica_id()
            cta = tlx.cluster_cta_rank()
            it = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for pair in range(tl.program_id(0) // 2, num_pairs, tl.num_programs(0) // 2):
                first_m = (pair // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pairs_m - first_m, GROUP_M)
                pair_m = first_m + (pair % group_size_m)
                pid_n = (pair % num_pid_in_group) // group_size_m
                pid_m = 2 * pair_m + cta
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                acc = tl.zeros((SPLIT_M, BLOCK_N), dtype=tl.float32)
                prev = 0
                for ki in range(k_tiles):
                    stage = it % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(full_bars, stage), (it // NUM_STAGES) & 1)
                    acc = tlx.async_dot(tlx.local_view(a_ring, stage * NUM_CONSUMERS + cid), tlx.local_view(b_ring, stage), acc)
                    acc = tlx.async_dot_wait(1, acc)
                    if ki > 0:
                        tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                    prev = stage
                    it += 1
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                c_desc.store([offs_am + cid * SPLIT_M, offs_bn], acc.to(tl.bfloat16))
