"""tlx-gemm-rs: C_partial = A @ B, m-blocks in sending order; each tile's tile-done slot is notified by the producer warp group once the consumers report its TMA stores complete.

Emitted by @ovl/tlx-emitter (TLX, warp-specialised). The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def tlx_gemm_rs(a_ptr, b_ptr, c_ptr, M, N, K, sig_ptr, ovl_rank, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_CONSUMERS: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, GROUP_M: tl.constexpr):
    SPLIT_M: tl.constexpr = BLOCK_M // NUM_CONSUMERS
    EPI_N: tl.constexpr = BLOCK_N // EPILOGUE_SPLIT
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[SPLIT_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, EPI_N])
    a_ring = tlx.local_alloc((SPLIT_M, BLOCK_K), tl.bfloat16, NUM_STAGES * NUM_CONSUMERS)
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.bfloat16, NUM_STAGES)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_CONSUMERS)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Tile t's stores are complete once stored_bars[t % 8] completes its phase (one arrival per storing warp group).
    stored_bars = tlx.alloc_barriers(num_barriers=8, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            # Producer: per tile, the communication waits, then TMA loads into the ring.
            it = 0
            # stored_slot_k: the slot of the tile k tiles back (-1: none); the producer notifies tiles 3 tiles after them, 1 at a time.
            stored_slot_1 = -1
            stored_slot_2 = -1
            stored_slot_3 = -1
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
                own_tile = (tile_id - tl.program_id(0)) // tl.num_programs(0)
                done_tile = own_tile - 3
                if done_tile >= 0:
                    tlx.barrier_wait(tlx.local_view(stored_bars, done_tile % 8), (done_tile // 8) & 1)
                    if stored_slot_3 >= 0:
                        tl.atomic_add(sig_ptr + stored_slot_3, 1, sem="release", scope="gpu")
                stored_slot_3 = stored_slot_2
                stored_slot_2 = stored_slot_1
                ovl_m = pid_m
                stored_slot_1 = ovl_m // 2 + 10
            # The tiles still owed (from the first the loop did not notify), oldest first.
            own_tiles = (num_tiles - tl.program_id(0) + tl.num_programs(0) - 1) // tl.num_programs(0)
            owed_from = (own_tiles // 1) * 1 - 3
            if own_tiles - 3 >= owed_from:
                done_tile = own_tiles - 3
                if done_tile >= 0:
                    tlx.barrier_wait(tlx.local_view(stored_bars, done_tile % 8), (done_tile // 8) & 1)
                    if stored_slot_3 >= 0:
                        tl.atomic_add(sig_ptr + stored_slot_3, 1, sem="release", scope="gpu")
            if own_tiles - 2 >= owed_from:
                done_tile = own_tiles - 2
                if done_tile >= 0:
                    tlx.barrier_wait(tlx.local_view(stored_bars, done_tile % 8), (done_tile // 8) & 1)
                    if stored_slot_2 >= 0:
                        tl.atomic_add(sig_ptr + stored_slot_2, 1, sem="release", scope="gpu")
            if own_tiles - 1 >= owed_from:
                done_tile = own_tiles - 1
                if done_tile >= 0:
                    tlx.barrier_wait(tlx.local_view(stored_bars, done_tile % 8), (done_tile // 8) & 1)
                    if stored_slot_1 >= 0:
                        tl.atomic_add(sig_ptr + stored_slot_1, 1, sem="release", scope="gpu")
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            # Consumers: wgmma on the ring slots, then the epilogue.
            cid: tl.constexpr = tlx.async_task_replica_id()
            it = 0
            stored_tile = -1
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
                halves = tl.permute(tl.reshape(acc, (SPLIT_M, 2, EPI_N)), (0, 2, 1))
                acc0, acc1 = tl.split(halves)
                c_desc.store([offs_am + cid * SPLIT_M, offs_bn], acc0.to(tl.bfloat16))
                c_desc.store([offs_am + cid * SPLIT_M, offs_bn + EPI_N], acc1.to(tl.bfloat16))
                # This warp group's previous tile's stores are older than this tile's: tell the producer they are complete.
                tl.inline_asm_elementwise("cp.async.bulk.wait_group 2; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
                tlx.named_barrier_wait(13 + cid, 128)
                if stored_tile >= 0:
                    tlx.barrier_arrive(tlx.local_view(stored_bars, stored_tile % 8))
                stored_tile = (tile_id - tl.program_id(0)) // tl.num_programs(0)
            tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
            tlx.named_barrier_wait(13 + cid, 128)
            if stored_tile >= 0:
                tlx.barrier_arrive(tlx.local_view(stored_bars, stored_tile % 8))
