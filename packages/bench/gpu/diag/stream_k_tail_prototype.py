"""A prototype: the cooperative TLX GEMM (128x256x64, 4 stages, quarter stores) with a stream-K tail.

Hand-written from the plain kernel `emit-tlx-compute.ts` writes for `coop128x256s4q`. With P programs
and T tiles of K/BLOCK_K k-steps each, the last partial wave and one whole wave before it (`sk_tiles`
= T mod P + P, when T > P and the wave is partial) are shared out by k-steps: program p takes the
contiguous run [p * S / P, (p + 1) * S / P) of the S = sk_tiles * k_tiles (tile, k-step) pairs, a tile's
k-steps or more, so every shared tile has two pieces. `STREAM_K` 0 keeps every tile whole (the cost of the structure alone). A piece that is not the tile's last to count in
stores its fp32 partial sum (eight 64x32 TMA stores per consumer through the epilogue's staging, which
the fp32 view aliases) in a slot of its own (2 per program: the piece that starts a tile and the one
that does not), waits for the stores to land and counts itself in (acq_rel, per tile and consumer);
the last piece adds the other's partial (TMA loads into the staging, an mbarrier per slot) to its
own sum in registers, stores the tile and sets the count back to zero. The piece that starts a
tile (its program's last) looks at the count first: when the other piece is already in, it skips
its own partial store. No program waits for another.

    python3 packages/bench/gpu/diag/stream_k_tail_cases.py <bench-dir> [...]   # adds it to a benchmark

Measured on an H100 (results/gpu/stream-k-tlx-h100-2026-11-28/): correct at all 36 MLP shapes but
slower than the whole-wave kernel at most of them.
"""

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def tlx_gemm(
    a_ptr,
    b_ptr,
    c_ptr,
    partials_ptr,
    counts_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    NUM_CONSUMERS: tl.constexpr,
    EPILOGUE_SPLIT: tl.constexpr,
    GROUP_M: tl.constexpr,
    STREAM_K: tl.constexpr,
):
    SPLIT_M: tl.constexpr = BLOCK_M // NUM_CONSUMERS
    EPI_N: tl.constexpr = BLOCK_N // EPILOGUE_SPLIT
    a_desc = tl.make_tensor_descriptor(
        a_ptr, shape=[M, K], strides=[K, 1], block_shape=[SPLIT_M, BLOCK_K]
    )
    b_desc = tl.make_tensor_descriptor(
        b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N]
    )
    c_desc = tl.make_tensor_descriptor(
        c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, EPI_N]
    )
    a_ring = tlx.local_alloc(
        (SPLIT_M, BLOCK_K), tl.bfloat16, NUM_STAGES * NUM_CONSUMERS
    )
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.bfloat16, NUM_STAGES)
    stage_mem = tlx.storage_alias_spec()
    c_stage = tlx.local_alloc(
        (SPLIT_M, EPI_N), tl.bfloat16, 2 * NUM_CONSUMERS, reuse=stage_mem
    )
    p_stage = tlx.local_alloc(
        (SPLIT_M, 32), tl.float32, 2 * NUM_CONSUMERS, reuse=stage_mem
    )
    e_stage = tlx.local_alloc(
        (SPLIT_M, 32), tl.bfloat16, 4 * NUM_CONSUMERS, reuse=stage_mem
    )
    red_bars = tlx.alloc_barriers(num_barriers=2 * NUM_CONSUMERS, arrive_count=1)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_CONSUMERS)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Stream-K: the last (partial) wave's tiles (and one whole wave more when it is under half full)
    # are shared out by k-steps, each program a contiguous run of (tile, k) pairs.
    P = tl.num_programs(0)
    c8_desc = tl.make_tensor_descriptor(
        c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, 32]
    )
    part_desc = tl.make_tensor_descriptor(
        partials_ptr,
        shape=[2 * P * BLOCK_M, BLOCK_N],
        strides=[BLOCK_N, 1],
        block_shape=[SPLIT_M, 32],
    )
    pid = tl.program_id(0)
    tail = num_tiles % P
    # The last partial wave and one whole wave before it: each program takes a tile's k-steps or more, so a
    # tile has at most two pieces.
    sk_tiles = tl.where(
        (tail > 0) & (num_tiles >= P + tail) & (STREAM_K != 0), tail + P, 0
    )
    whole = num_tiles - sk_tiles
    sk_iters = sk_tiles * k_tiles
    lo = (pid * sk_iters) // P
    hi = ((pid + 1) * sk_iters) // P
    first_t = lo // k_tiles
    n_units = tl.where(hi > lo, (hi - 1) // k_tiles - first_t + 1, 0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            it = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for unit in range(pid, whole + P * n_units, P):
                in_sk = unit >= whole
                t = first_t + (unit - pid - whole + P - 1) // P * in_sk.to(tl.int32)
                tile_id = tl.where(in_sk, whole + t, unit)
                k0 = tl.where(in_sk, tl.maximum(lo - t * k_tiles, 0), 0)
                k1 = tl.where(in_sk, tl.minimum(hi - t * k_tiles, k_tiles), k_tiles)
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                pid_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                for ki in range(k0, k1):
                    stage = it % NUM_STAGES
                    tlx.barrier_wait(
                        tlx.local_view(empty_bars, stage), ((it // NUM_STAGES) & 1) ^ 1
                    )
                    full = tlx.local_view(full_bars, stage)
                    tlx.barrier_expect_bytes(full, 49152)
                    for c in tl.static_range(NUM_CONSUMERS):
                        tlx.async_descriptor_load(
                            a_desc,
                            tlx.local_view(a_ring, stage * NUM_CONSUMERS + c),
                            [offs_am + c * SPLIT_M, ki * BLOCK_K],
                            full,
                        )
                    tlx.async_descriptor_load(
                        b_desc,
                        tlx.local_view(b_ring, stage),
                        [ki * BLOCK_K, offs_bn],
                        full,
                    )
                    it += 1
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            cid: tl.constexpr = tlx.async_task_replica_id()
            it = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for unit in range(pid, whole + P * n_units, P):
                in_sk = unit >= whole
                t = first_t + (unit - pid - whole + P - 1) // P * in_sk.to(tl.int32)
                tile_id = tl.where(in_sk, whole + t, unit)
                k0 = tl.where(in_sk, tl.maximum(lo - t * k_tiles, 0), 0)
                k1 = tl.where(in_sk, tl.minimum(hi - t * k_tiles, k_tiles), k_tiles)
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                pid_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                acc = tl.zeros((SPLIT_M, BLOCK_N), dtype=tl.float32)
                prev = 0
                for ki in range(k0, k1):
                    stage = it % NUM_STAGES
                    tlx.barrier_wait(
                        tlx.local_view(full_bars, stage), (it // NUM_STAGES) & 1
                    )
                    acc = tlx.async_dot(
                        tlx.local_view(a_ring, stage * NUM_CONSUMERS + cid),
                        tlx.local_view(b_ring, stage),
                        acc,
                    )
                    acc = tlx.async_dot_wait(1, acc)
                    if ki > k0:
                        tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                    prev = stage
                    it += 1
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                store = True
                if (k0 > 0) | (k1 < k_tiles):
                    g0 = t * k_tiles
                    p_first = ((g0 + 1) * P - 1) // sk_iters
                    p_last = ((g0 + k_tiles) * P - 1) // sk_iters
                    n = p_last - p_first + 1
                    cnt = counts_ptr + t * NUM_CONSUMERS + cid
                    seen = 0
                    if k0 == 0:
                        seen = tl.atomic_add(cnt, 0, sem="acquire", scope="gpu")
                    h0, h1 = tl.split(
                        tl.permute(tl.reshape(acc, (SPLIT_M, 2, 128)), (0, 2, 1))
                    )
                    f0, f1 = tl.split(
                        tl.permute(tl.reshape(h0, (SPLIT_M, 2, 64)), (0, 2, 1))
                    )
                    f2, f3 = tl.split(
                        tl.permute(tl.reshape(h1, (SPLIT_M, 2, 64)), (0, 2, 1))
                    )
                    e0, e1 = tl.split(
                        tl.permute(tl.reshape(f0, (SPLIT_M, 2, 32)), (0, 2, 1))
                    )
                    e2, e3 = tl.split(
                        tl.permute(tl.reshape(f1, (SPLIT_M, 2, 32)), (0, 2, 1))
                    )
                    e4, e5 = tl.split(
                        tl.permute(tl.reshape(f2, (SPLIT_M, 2, 32)), (0, 2, 1))
                    )
                    e6, e7 = tl.split(
                        tl.permute(tl.reshape(f3, (SPLIT_M, 2, 32)), (0, 2, 1))
                    )
                    if seen != n - 1:
                        slot = 2 * pid + (k0 == 0).to(tl.int32)
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(tlx.local_view(p_stage, cid * 2 + 0), e0)
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 0),
                            [slot * BLOCK_M + cid * SPLIT_M, 0],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(tlx.local_view(p_stage, cid * 2 + 1), e1)
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 1),
                            [slot * BLOCK_M + cid * SPLIT_M, 32],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(tlx.local_view(p_stage, cid * 2 + 0), e2)
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 0),
                            [slot * BLOCK_M + cid * SPLIT_M, 64],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(tlx.local_view(p_stage, cid * 2 + 1), e3)
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 1),
                            [slot * BLOCK_M + cid * SPLIT_M, 96],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(tlx.local_view(p_stage, cid * 2 + 0), e4)
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 0),
                            [slot * BLOCK_M + cid * SPLIT_M, 128],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(tlx.local_view(p_stage, cid * 2 + 1), e5)
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 1),
                            [slot * BLOCK_M + cid * SPLIT_M, 160],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(tlx.local_view(p_stage, cid * 2 + 0), e6)
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 0),
                            [slot * BLOCK_M + cid * SPLIT_M, 192],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(tlx.local_view(p_stage, cid * 2 + 1), e7)
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 1),
                            [slot * BLOCK_M + cid * SPLIT_M, 224],
                        )
                        tl.inline_asm_elementwise(
                            "cp.async.bulk.wait_group 0; mov.b32 $0, 0;",
                            "=r",
                            [],
                            dtype=tl.int32,
                            is_pure=False,
                            pack=1,
                        )
                        tlx.named_barrier_wait(12 + cid, 128)
                        seen = tl.atomic_add(cnt, 1, sem="acq_rel", scope="gpu")
                    store = seen == n - 1
                    if store:
                        tlx.async_descriptor_store_wait(0)
                        o1 = p_first + (pid == p_first).to(tl.int32)
                        row = (
                            2 * o1 + (o1 == p_first).to(tl.int32)
                        ) * BLOCK_M + cid * SPLIT_M
                        tlx.named_barrier_wait(12 + cid, 128)
                        tlx.barrier_expect_bytes(
                            tlx.local_view(red_bars, cid * 2 + 0), 8192
                        )
                        tlx.async_descriptor_load(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 0),
                            [row, 0],
                            tlx.local_view(red_bars, cid * 2 + 0),
                        )
                        tlx.barrier_expect_bytes(
                            tlx.local_view(red_bars, cid * 2 + 1), 8192
                        )
                        tlx.async_descriptor_load(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 1),
                            [row, 32],
                            tlx.local_view(red_bars, cid * 2 + 1),
                        )
                        tlx.barrier_wait(tlx.local_view(red_bars, cid * 2 + 0), 0)
                        e0 = e0 + tlx.local_load(tlx.local_view(p_stage, cid * 2 + 0))
                        tlx.named_barrier_wait(12 + cid, 128)
                        tlx.barrier_expect_bytes(
                            tlx.local_view(red_bars, cid * 2 + 0), 8192
                        )
                        tlx.async_descriptor_load(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 0),
                            [row, 64],
                            tlx.local_view(red_bars, cid * 2 + 0),
                        )
                        tlx.barrier_wait(tlx.local_view(red_bars, cid * 2 + 1), 0)
                        e1 = e1 + tlx.local_load(tlx.local_view(p_stage, cid * 2 + 1))
                        tlx.named_barrier_wait(12 + cid, 128)
                        tlx.barrier_expect_bytes(
                            tlx.local_view(red_bars, cid * 2 + 1), 8192
                        )
                        tlx.async_descriptor_load(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 1),
                            [row, 96],
                            tlx.local_view(red_bars, cid * 2 + 1),
                        )
                        tlx.barrier_wait(tlx.local_view(red_bars, cid * 2 + 0), 1)
                        e2 = e2 + tlx.local_load(tlx.local_view(p_stage, cid * 2 + 0))
                        tlx.named_barrier_wait(12 + cid, 128)
                        tlx.barrier_expect_bytes(
                            tlx.local_view(red_bars, cid * 2 + 0), 8192
                        )
                        tlx.async_descriptor_load(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 0),
                            [row, 128],
                            tlx.local_view(red_bars, cid * 2 + 0),
                        )
                        tlx.barrier_wait(tlx.local_view(red_bars, cid * 2 + 1), 1)
                        e3 = e3 + tlx.local_load(tlx.local_view(p_stage, cid * 2 + 1))
                        tlx.named_barrier_wait(12 + cid, 128)
                        tlx.barrier_expect_bytes(
                            tlx.local_view(red_bars, cid * 2 + 1), 8192
                        )
                        tlx.async_descriptor_load(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 1),
                            [row, 160],
                            tlx.local_view(red_bars, cid * 2 + 1),
                        )
                        tlx.barrier_wait(tlx.local_view(red_bars, cid * 2 + 0), 0)
                        e4 = e4 + tlx.local_load(tlx.local_view(p_stage, cid * 2 + 0))
                        tlx.named_barrier_wait(12 + cid, 128)
                        tlx.barrier_expect_bytes(
                            tlx.local_view(red_bars, cid * 2 + 0), 8192
                        )
                        tlx.async_descriptor_load(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 0),
                            [row, 192],
                            tlx.local_view(red_bars, cid * 2 + 0),
                        )
                        tlx.barrier_wait(tlx.local_view(red_bars, cid * 2 + 1), 0)
                        e5 = e5 + tlx.local_load(tlx.local_view(p_stage, cid * 2 + 1))
                        tlx.named_barrier_wait(12 + cid, 128)
                        tlx.barrier_expect_bytes(
                            tlx.local_view(red_bars, cid * 2 + 1), 8192
                        )
                        tlx.async_descriptor_load(
                            part_desc,
                            tlx.local_view(p_stage, cid * 2 + 1),
                            [row, 224],
                            tlx.local_view(red_bars, cid * 2 + 1),
                        )
                        tlx.barrier_wait(tlx.local_view(red_bars, cid * 2 + 0), 1)
                        e6 = e6 + tlx.local_load(tlx.local_view(p_stage, cid * 2 + 0))
                        tlx.barrier_wait(tlx.local_view(red_bars, cid * 2 + 1), 1)
                        e7 = e7 + tlx.local_load(tlx.local_view(p_stage, cid * 2 + 1))
                        tl.atomic_xchg(cnt, 0, sem="relaxed", scope="gpu")
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(
                            tlx.local_view(e_stage, cid * 4 + 0), e0.to(tl.bfloat16)
                        )
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            c8_desc,
                            tlx.local_view(e_stage, cid * 4 + 0),
                            [offs_am + cid * SPLIT_M, offs_bn + 0],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(
                            tlx.local_view(e_stage, cid * 4 + 1), e1.to(tl.bfloat16)
                        )
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            c8_desc,
                            tlx.local_view(e_stage, cid * 4 + 1),
                            [offs_am + cid * SPLIT_M, offs_bn + 32],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(
                            tlx.local_view(e_stage, cid * 4 + 0), e2.to(tl.bfloat16)
                        )
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            c8_desc,
                            tlx.local_view(e_stage, cid * 4 + 0),
                            [offs_am + cid * SPLIT_M, offs_bn + 64],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(
                            tlx.local_view(e_stage, cid * 4 + 1), e3.to(tl.bfloat16)
                        )
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            c8_desc,
                            tlx.local_view(e_stage, cid * 4 + 1),
                            [offs_am + cid * SPLIT_M, offs_bn + 96],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(
                            tlx.local_view(e_stage, cid * 4 + 0), e4.to(tl.bfloat16)
                        )
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            c8_desc,
                            tlx.local_view(e_stage, cid * 4 + 0),
                            [offs_am + cid * SPLIT_M, offs_bn + 128],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(
                            tlx.local_view(e_stage, cid * 4 + 1), e5.to(tl.bfloat16)
                        )
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            c8_desc,
                            tlx.local_view(e_stage, cid * 4 + 1),
                            [offs_am + cid * SPLIT_M, offs_bn + 160],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(
                            tlx.local_view(e_stage, cid * 4 + 0), e6.to(tl.bfloat16)
                        )
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            c8_desc,
                            tlx.local_view(e_stage, cid * 4 + 0),
                            [offs_am + cid * SPLIT_M, offs_bn + 192],
                        )
                        tlx.async_descriptor_store_wait(1)
                        tlx.local_store(
                            tlx.local_view(e_stage, cid * 4 + 1), e7.to(tl.bfloat16)
                        )
                        tlx.fence_async_shared()
                        tlx.async_descriptor_store(
                            c8_desc,
                            tlx.local_view(e_stage, cid * 4 + 1),
                            [offs_am + cid * SPLIT_M, offs_bn + 224],
                        )
                    store = False
                if store:
                    acc0, acc1 = tl.split(
                        tl.permute(tl.reshape(acc, (SPLIT_M, 2, 2 * EPI_N)), (0, 2, 1))
                    )
                    q0, q1 = tl.split(
                        tl.permute(tl.reshape(acc0, (SPLIT_M, 2, EPI_N)), (0, 2, 1))
                    )
                    q2, q3 = tl.split(
                        tl.permute(tl.reshape(acc1, (SPLIT_M, 2, EPI_N)), (0, 2, 1))
                    )
                    tlx.async_descriptor_store_wait(1)
                    tlx.local_store(
                        tlx.local_view(c_stage, cid * 2 + 0), q0.to(tl.bfloat16)
                    )
                    tlx.fence_async_shared()
                    tlx.async_descriptor_store(
                        c_desc,
                        tlx.local_view(c_stage, cid * 2 + 0),
                        [offs_am + cid * SPLIT_M, offs_bn + 0 * EPI_N],
                    )
                    tlx.async_descriptor_store_wait(1)
                    tlx.local_store(
                        tlx.local_view(c_stage, cid * 2 + 1), q1.to(tl.bfloat16)
                    )
                    tlx.fence_async_shared()
                    tlx.async_descriptor_store(
                        c_desc,
                        tlx.local_view(c_stage, cid * 2 + 1),
                        [offs_am + cid * SPLIT_M, offs_bn + 1 * EPI_N],
                    )
                    tlx.async_descriptor_store_wait(1)
                    tlx.local_store(
                        tlx.local_view(c_stage, cid * 2 + 0), q2.to(tl.bfloat16)
                    )
                    tlx.fence_async_shared()
                    tlx.async_descriptor_store(
                        c_desc,
                        tlx.local_view(c_stage, cid * 2 + 0),
                        [offs_am + cid * SPLIT_M, offs_bn + 2 * EPI_N],
                    )
                    tlx.async_descriptor_store_wait(1)
                    tlx.local_store(
                        tlx.local_view(c_stage, cid * 2 + 1), q3.to(tl.bfloat16)
                    )
                    tlx.fence_async_shared()
                    tlx.async_descriptor_store(
                        c_desc,
                        tlx.local_view(c_stage, cid * 2 + 1),
                        [offs_am + cid * SPLIT_M, offs_bn + 3 * EPI_N],
                    )
            tlx.async_descriptor_store_wait(0)
