"""tlx-gemm-rs: C_partial = A @ B, m-blocks in sending order; each tile's tile-done slot is notified by a TMA reduce-add once its TMA stores are complete (a tile later).

Emitted by @ovl/tlx-emitter (TLX, warp-specialised). The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def tile_reduce_notify(sig_desc, rows, slot):
    """Add 1 to sig[slot] by one TMA reduce-add of row slot % 4 of rows (one-hot) at slot's 16-byte aligned group of four."""
    r = slot % 4
    at = slot - r
    if r == 0:
        tlx.async_descriptor_store(sig_desc, tlx.local_slice(rows, [0], [4]), [at], store_reduce="add")
    elif r == 1:
        tlx.async_descriptor_store(sig_desc, tlx.local_slice(rows, [32], [4]), [at], store_reduce="add")
    elif r == 2:
        tlx.async_descriptor_store(sig_desc, tlx.local_slice(rows, [64], [4]), [at], store_reduce="add")
    else:
        tlx.async_descriptor_store(sig_desc, tlx.local_slice(rows, [96], [4]), [at], store_reduce="add")


@triton.jit
def tlx_gemm_rs(a_ptr, b_ptr, c_ptr, M, N, K, sig_ptr, ovl_rank, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_CONSUMERS: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, NUM_SLOTS: tl.constexpr, GROUP_M: tl.constexpr):
    SPLIT_M: tl.constexpr = BLOCK_M // NUM_CONSUMERS
    EPI_N: tl.constexpr = BLOCK_N // EPILOGUE_SPLIT
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[SPLIT_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, EPI_N])
    a_ring = tlx.local_alloc((SPLIT_M, BLOCK_K), tl.bfloat16, NUM_STAGES * NUM_CONSUMERS)
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.bfloat16, NUM_STAGES)
    c_stage = tlx.local_alloc((SPLIT_M, EPI_N), tl.bfloat16, 2 * NUM_CONSUMERS)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_CONSUMERS)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Four 128-byte rows of 32 int32, row j one-hot at j: the sources of the TMA reduce-add notifies.
    notify_rows = tlx.local_view(tlx.local_alloc((128,), tl.int32, 1), 0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            # Producer: per tile, the communication waits, then TMA loads into the ring.
            it = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                ovl_m = visit_m
                pid_m = (ovl_m + 4 * ovl_rank + 4) % 8
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                for ki in range(k_tiles):
                    stage = it % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(empty_bars, stage), ((it // NUM_STAGES) & 1) ^ 1)
                    full = tlx.local_view(full_bars, stage)
                    tlx.barrier_expect_bytes(full, 49152)
                    for c in tl.static_range(NUM_CONSUMERS):
                        tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, stage * NUM_CONSUMERS + c), [offs_am + c * SPLIT_M, ki * BLOCK_K], full)
                    tlx.async_descriptor_load(b_desc, tlx.local_view(b_ring, stage), [ki * BLOCK_K, offs_bn], full)
                    it += 1
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            # Consumers: wgmma on the ring slots, then the epilogue.
            cid: tl.constexpr = tlx.async_task_replica_id()
            it = 0
            sig_desc = tl.make_tensor_descriptor(sig_ptr, shape=[NUM_SLOTS], strides=[1], block_shape=[4])
            pending_slot = -1
            if cid == 0:
                tlx.local_store(notify_rows, (tl.arange(0, 128) % 33 == 0).to(tl.int32))
                tlx.fence_async_shared()
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                ovl_m = visit_m
                pid_m = (ovl_m + 4 * ovl_rank + 4) % 8
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                acc = tl.zeros((SPLIT_M, BLOCK_N), dtype=tl.float32)
                prev = 0
                for ki in range(k_tiles):
                    stage = it % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(full_bars, stage), (it // NUM_STAGES) & 1)
                    acc = tlx.async_dot(tlx.local_view(a_ring, stage * NUM_CONSUMERS + cid), tlx.local_view(b_ring, stage), acc)
                    # Keep one wgmma in flight; the one before it is done, so its stage is free.
                    acc = tlx.async_dot_wait(1, acc)
                    if ki > 0:
                        tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                    prev = stage
                    it += 1
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                # Epilogue: this consumer's rows of the tile, by EPILOGUE_SPLIT TMA stores.
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
                # The previous tile's stores are older than this tile's: once written, notify its slot.
                tl.inline_asm_elementwise("cp.async.bulk.wait_group 4; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
                tlx.named_barrier_wait(11, 256)
                if cid == 0:
                    if pending_slot >= 0:
                        tile_reduce_notify(sig_desc, notify_rows, pending_slot)
                ovl_m = pid_m
                pending_slot = ovl_m // 2 + 10
                if tile_id + 2 * tl.num_programs(0) >= num_tiles:
                    # One of the program's last two tiles: notify it now, not with the next tile.
                    tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
                    tlx.named_barrier_wait(11, 256)
                    if cid == 0:
                        if pending_slot >= 0:
                            tile_reduce_notify(sig_desc, notify_rows, pending_slot)
                    pending_slot = -1
            tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
            tlx.named_barrier_wait(11, 256)
            if cid == 0:
                if pending_slot >= 0:
                    tile_reduce_notify(sig_desc, notify_rows, pending_slot)
            if cid == 0:
                tlx.async_descriptor_store_wait(0)
            # The last stores leave shared memory before the consumer exits.
            tlx.async_descriptor_store_wait(0)
