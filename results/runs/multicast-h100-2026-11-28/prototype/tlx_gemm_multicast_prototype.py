"""tlx-gemm: C = A @ B, warp-specialised, clusters of two CTAs along M sharing B by TMA multicast."""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def tlx_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_CONSUMERS: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, GROUP_M: tl.constexpr):
    SPLIT_M: tl.constexpr = BLOCK_M // NUM_CONSUMERS
    EPI_N: tl.constexpr = BLOCK_N // EPILOGUE_SPLIT
    HALF_N: tl.constexpr = BLOCK_N // 2
    GROUP_P: tl.constexpr = GROUP_M // 2
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[SPLIT_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, HALF_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, EPI_N])
    a_ring = tlx.local_alloc((SPLIT_M, BLOCK_K), tl.bfloat16, NUM_STAGES * NUM_CONSUMERS)
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.bfloat16, NUM_STAGES)
    c_stage = tlx.local_alloc((SPLIT_M, EPI_N), tl.bfloat16, 2 * NUM_CONSUMERS)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2 * NUM_CONSUMERS)
    cta = tlx.cluster_cta_rank()
    peer = cta ^ 1
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_p = num_pid_m // 2
    num_pairs = num_pid_p * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    cluster_id = tl.program_id(0) // 2
    num_clusters = tl.num_programs(0) // 2
    with tlx.async_tasks():
        with tlx.async_task("default"):
            it = 0
            num_pid_in_group = GROUP_P * num_pid_n
            for pair_id in range(cluster_id, num_pairs, num_clusters):
                first_p = (pair_id // num_pid_in_group) * GROUP_P
                group_size_p = min(num_pid_p - first_p, GROUP_P)
                visit_p = first_p + (pair_id % group_size_p)
                pid_n = (pair_id % num_pid_in_group) // group_size_p
                pid_m = visit_p * 2 + cta
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                for ki in range(k_tiles):
                    stage = it % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(empty_bars, stage), ((it // NUM_STAGES) & 1) ^ 1)
                    full = tlx.local_view(full_bars, stage)
                    tlx.barrier_expect_bytes(full, 49152)
                    for c in tl.static_range(NUM_CONSUMERS):
                        tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, stage * NUM_CONSUMERS + c), [offs_am + c * SPLIT_M, ki * BLOCK_K], full)
                    if cta == 0:
                        tlx.async_descriptor_load(b_desc, tlx.local_slice(tlx.local_view(b_ring, stage), [0, 0], [BLOCK_K, HALF_N]), [ki * BLOCK_K, offs_bn], full, multicast_targets=[0, 1])
                    else:
                        tlx.async_descriptor_load(b_desc, tlx.local_slice(tlx.local_view(b_ring, stage), [0, HALF_N], [BLOCK_K, HALF_N]), [ki * BLOCK_K, offs_bn + HALF_N], full, multicast_targets=[0, 1])
                    it += 1
            # Every stage released by both CTAs' consumers: no arrive from the peer is still on its way here.
            for s in range(NUM_STAGES):
                stage = it % NUM_STAGES
                tlx.barrier_wait(tlx.local_view(empty_bars, stage), ((it // NUM_STAGES) & 1) ^ 1)
                it += 1
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            cid: tl.constexpr = tlx.async_task_replica_id()
            it = 0
            num_pid_in_group = GROUP_P * num_pid_n
            for pair_id in range(cluster_id, num_pairs, num_clusters):
                first_p = (pair_id // num_pid_in_group) * GROUP_P
                group_size_p = min(num_pid_p - first_p, GROUP_P)
                visit_p = first_p + (pair_id % group_size_p)
                pid_n = (pair_id % num_pid_in_group) // group_size_p
                pid_m = visit_p * 2 + cta
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
                        tlx.barrier_arrive(tlx.local_view(empty_bars, prev), 1, remote_cta_rank=peer)
                    prev = stage
                    it += 1
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                tlx.barrier_arrive(tlx.local_view(empty_bars, prev), 1, remote_cta_rank=peer)
                acc0, acc1 = tl.split(tl.permute(tl.reshape(acc, (SPLIT_M, 2, 2 * EPI_N)), (0, 2, 1)))
                q0, q1 = tl.split(tl.permute(tl.reshape(acc0, (SPLIT_M, 2, EPI_N)), (0, 2, 1)))
                q2, q3 = tl.split(tl.permute(tl.reshape(acc1, (SPLIT_M, 2, EPI_N)), (0, 2, 1)))
                tlx.async_descriptor_store_wait(1)
                tlx.local_store(tlx.local_view(c_stage, cid * 2 + 0), q0.to(tl.bfloat16))
                tlx.fence_async_shared()
                tlx.async_descriptor_store(c_desc, tlx.local_view(c_stage, cid * 2 + 0), [offs_am + cid * SPLIT_M, offs_bn + 0 * EPI_N])
                tlx.async_descriptor_store_wait(1)
                tlx.local_store(tlx.local_view(c_stage, cid * 2 + 1), q1.to(tl.bfloat16))
                tlx.fence_async_shared()
                tlx.async_descriptor_store(c_desc, tlx.local_view(c_stage, cid * 2 + 1), [offs_am + cid * SPLIT_M, offs_bn + 1 * EPI_N])
                tlx.async_descriptor_store_wait(1)
                tlx.local_store(tlx.local_view(c_stage, cid * 2 + 0), q2.to(tl.bfloat16))
                tlx.fence_async_shared()
                tlx.async_descriptor_store(c_desc, tlx.local_view(c_stage, cid * 2 + 0), [offs_am + cid * SPLIT_M, offs_bn + 2 * EPI_N])
                tlx.async_descriptor_store_wait(1)
                tlx.local_store(tlx.local_view(c_stage, cid * 2 + 1), q3.to(tl.bfloat16))
                tlx.fence_async_shared()
                tlx.async_descriptor_store(c_desc, tlx.local_view(c_stage, cid * 2 + 1), [offs_am + cid * SPLIT_M, offs_bn + 3 * EPI_N])
            tlx.async_descriptor_store_wait(0)
