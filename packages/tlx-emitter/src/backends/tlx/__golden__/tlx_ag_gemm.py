"""tlx-ag-gemm: C = AllGather(A) @ B; the producer waits on the chunk slot of the rows it is about to load.

Emitted by @ovl/tlx-emitter (TLX, warp-specialised). The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token


@triton.jit
def fence_proxy_async(token):
    """Order later TMA (async proxy) reads of global memory after the acquire that produced token; returns token."""
    return tl.inline_asm_elementwise("fence.proxy.async.global; mov.b32 $0, $1;", "=r,r", [token], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def tlx_ag_gemm(a_ptr, b_ptr, c_ptr, M, N, K, ovl_rank, sig_ptr, err_ptr, epoch_ptr, timeout_ns, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_CONSUMERS: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, WAIT_ARRIVALS: tl.constexpr, GROUP_M: tl.constexpr):
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
    with tlx.async_tasks():
        with tlx.async_task("default"):
            # Producer: per tile, the communication waits, then TMA loads into the ring.
            it = 0
            # This launch's wait target: epoch x arrivals, the epoch read from this rank's epoch word.
            target = load_epoch_target(epoch_ptr, WAIT_ARRIVALS)
            # Bit s: slot s (< 32) was already waited on by this producer in this launch.
            waited = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                ovl_m = visit_m
                pid_m = (ovl_m + 4 * ovl_rank) % 8
                offs_am = pid_m * BLOCK_M
                ovl_m = pid_m
                slot = tl.maximum(2 * (((-2) * ovl_rank + ovl_m // 2 + 2) // 4) + 4 * ((2 * ovl_rank - ovl_m // 2 + 3) // 4) + ovl_m // 2 - 4, (-1))
                bit = tl.where(slot < 32, tl.full([], 1, tl.int32) << (slot & 31), 0)
                if (slot >= 0) & ((waited & bit) == 0):
                    tok = fence_proxy_async(wait_slot(sig_ptr, slot, target, err_ptr, ovl_rank, timeout_ns))
                    offs_am = consume_token(offs_am, tok)
                    waited = waited | bit
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
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                ovl_m = visit_m
                pid_m = (ovl_m + 4 * ovl_rank) % 8
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
