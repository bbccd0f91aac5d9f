"""tlx-gemm: C = A @ B for sm_100a, warp-specialised (TMA loads, tcgen05 MMAs into TMEM, TMEM epilogue).

Emitted by @ovl/tlx-emitter (TLX, warp-specialised, sm_100a). The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def tlx_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_ACC: tl.constexpr, EPILOGUE_N: tl.constexpr, GROUP_M: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, EPILOGUE_N])
    a_ring = tlx.local_alloc((BLOCK_M, BLOCK_K), tl.bfloat16, NUM_STAGES)
    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.bfloat16, NUM_STAGES)
    acc_tmem = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float32, NUM_ACC, tlx.storage_kind.tmem)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    acc_full_bars = tlx.alloc_barriers(num_barriers=NUM_ACC, arrive_count=1)
    acc_empty_bars = tlx.alloc_barriers(num_barriers=NUM_ACC, arrive_count=1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            # Epilogue: accumulator from TMEM to registers, C by TMA store.
            t = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                pid_m = visit_m
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                buf = t % NUM_ACC
                tlx.barrier_wait(tlx.local_view(acc_full_bars, buf), (t // NUM_ACC) & 1)
                acc = tlx.local_view(acc_tmem, buf)
                for e in tl.static_range(BLOCK_N // EPILOGUE_N):
                    part = tlx.local_load(tlx.subslice(acc, e * EPILOGUE_N, EPILOGUE_N))
                    c_desc.store([offs_am, offs_bn + e * EPILOGUE_N], part.to(tl.bfloat16))
                # The accumulator is in registers and stored: the MMA task may overwrite it.
                tlx.barrier_arrive(tlx.local_view(acc_empty_bars, buf))
                t += 1
        with tlx.async_task(num_warps=1, registers=48):
            # MMA: tcgen05 MMAs of a tile into one TMEM accumulator.
            it = 0
            t = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                pid_m = visit_m
                buf = t % NUM_ACC
                # Wait until the epilogue has read this accumulator (its previous tile).
                tlx.barrier_wait(tlx.local_view(acc_empty_bars, buf), ((t // NUM_ACC) & 1) ^ 1)
                acc = tlx.local_view(acc_tmem, buf)
                for ki in range(k_tiles):
                    stage = it % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(full_bars, stage), (it // NUM_STAGES) & 1)
                    # tcgen05 MMA into TMEM; its completion frees the stage for the loads.
                    tlx.async_dot(tlx.local_view(a_ring, stage), tlx.local_view(b_ring, stage), acc, use_acc=ki > 0, mBarriers=[tlx.local_view(empty_bars, stage)])
                    it += 1
                # acc_full completes once every MMA issued so far has.
                tlx.tcgen05_commit(tlx.local_view(acc_full_bars, buf))
                t += 1
        with tlx.async_task(num_warps=1, registers=48):
            # Loads: TMA of A and B into the ring.
            it = 0
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                pid_m = visit_m
                offs_am = pid_m * BLOCK_M
                offs_bn = pid_n * BLOCK_N
                for ki in range(k_tiles):
                    stage = it % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(empty_bars, stage), ((it // NUM_STAGES) & 1) ^ 1)
                    full = tlx.local_view(full_bars, stage)
                    tlx.barrier_expect_bytes(full, 49152)
                    tlx.async_descriptor_load(a_desc, tlx.local_view(a_ring, stage), [offs_am, ki * BLOCK_K], full)
                    tlx.async_descriptor_load(b_desc, tlx.local_view(b_ring, stage), [ki * BLOCK_K, offs_bn], full)
                    it += 1
