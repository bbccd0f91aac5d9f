"""tlx-gemm-rs: C_partial = A @ B, m-blocks in sending order; each tile's tile-done slot is notified once its TMA stores are complete (a tile later).

Emitted by @ovl/tlx-emitter (TLX, warp-specialised). The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def tile_notify(sig_ptr, slot, BAR_ID: tl.constexpr, BAR_THREADS: tl.constexpr, LEADER: tl.constexpr, SCOPE: tl.constexpr, PENDING: tl.constexpr):
    """Release-add 1 to sig[slot] (slot >= 0) once every bulk (TMA) store of this thread but the PENDING newest groups is complete, and every thread of the tile has got there."""
    if PENDING == 0:
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    elif PENDING == 1:
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 1; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    elif PENDING == 2:
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 2; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    elif PENDING == 3:
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 3; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.static_assert(PENDING == 4)
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 4; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    tlx.named_barrier_wait(BAR_ID, BAR_THREADS)
    if LEADER:
        if slot >= 0:
            tl.atomic_add(sig_ptr + slot, 1, sem="release", scope=SCOPE)


@triton.jit
def tlx_gemm_rs(a_ptr, b_ptr, c_ptr, M, N, K, sig_ptr, ovl_rank, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, GROUP_M: tl.constexpr):
    EPI_N: tl.constexpr = BLOCK_N // EPILOGUE_SPLIT
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, EPI_N])
    a_ring = tlx.local_alloc((BLOCK_M, BLOCK_K), tl.bfloat16, NUM_STAGES)
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.bfloat16, NUM_STAGES)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
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
                    tlx.barrier_expect_bytes(full, 32768)
                    tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, stage), [offs_am, ki * BLOCK_K], full)
                    tlx.async_descriptor_load(b_desc, tlx.local_view(b_ring, stage), [ki * BLOCK_K, offs_bn], full)
                    it += 1
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            # Consumers: wgmma on the ring slots, then the epilogue.
            cid: tl.constexpr = tlx.async_task_replica_id()
            it = 0
            turn = 0
            # Consumer 0 takes the tensor cores first.
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)
            pending_slot = -1
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                ovl_m = visit_m
                pid_m = (ovl_m + 4 * ovl_rank + 4) % 8
                offs_am = pid_m * BLOCK_M
                if turn == cid:
                    offs_bn = pid_n * BLOCK_N
                    tlx.named_barrier_wait(9 + cid, 256)
                    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    prev = 0
                    for ki in range(k_tiles):
                        stage = it % NUM_STAGES
                        tlx.barrier_wait(tlx.local_view(full_bars, stage), (it // NUM_STAGES) & 1)
                        acc = tlx.async_dot(tlx.local_view(a_ring, stage), tlx.local_view(b_ring, stage), acc)
                        # Keep one wgmma in flight; the one before it is done, so its stage is free.
                        acc = tlx.async_dot_wait(1, acc)
                        if ki > 0:
                            tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                        prev = stage
                        it += 1
                    # Every wgmma of the tile is issued: the other consumer's turn at the tensor cores.
                    tlx.named_barrier_arrive(10 - cid, 256)
                    acc = tlx.async_dot_wait(0, acc)
                    tlx.barrier_arrive(tlx.local_view(empty_bars, prev))
                    # Epilogue (overlaps the other consumer's wgmma chain): TMA stores of EPILOGUE_SPLIT column slices.
                    halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, EPI_N)), (0, 2, 1))
                    acc0, acc1 = tl.split(halves)
                    c_desc.store([offs_am, offs_bn], acc0.to(tl.bfloat16))
                    c_desc.store([offs_am, offs_bn + EPI_N], acc1.to(tl.bfloat16))
                    # The previous tile's stores are older than this tile's: notify its slot now.
                    tile_notify(sig_ptr, pending_slot, 11 + cid, 128, True, "gpu", 2)
                    ovl_m = pid_m
                    pending_slot = ovl_m // 2 + 10
                    if tile_id + 2 * tl.num_programs(0) >= num_tiles:
                        # One of the program's last two tiles: notify it now, not with the next tile.
                        tile_notify(sig_ptr, pending_slot, 11 + cid, 128, True, "gpu", 0)
                        pending_slot = -1
                else:
                    it += k_tiles
                turn ^= 1
            tile_notify(sig_ptr, pending_slot, 11 + cid, 128, True, "gpu", 0)
