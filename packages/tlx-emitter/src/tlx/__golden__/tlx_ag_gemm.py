"""tlx-ag-gemm: C = AllGather(A) @ B; the producer waits on the chunk slot of the rows it is about to load.

Emitted by @ovl/tlx-emitter (TLX, warp-specialised). Device primitives first, then the kernel.
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def ld_acquire_sys(ptr):
    """Load one int32 with acquire semantics at system scope (a peer's or the copy engine's release is seen)."""
    return tl.inline_asm_elementwise("ld.global.acquire.sys.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def global_timer():
    """Nanoseconds of the GPU global timer."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def load_epoch_target(epoch_ptr, arrivals):
    """This launch's wait target: epoch x arrivals in int32 (wrapping), the epoch read from the rank's epoch word."""
    return (tl.load(epoch_ptr) * arrivals).to(tl.int32)


@triton.jit
def wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns):
    """Acquire-spin until sig[slot] reaches target, compared wrap-aware in int32; bounded by timeout_ns.
    On timeout records (1, rank, slot, seen, target) in err_ptr and returns. The result is the token.
    """
    v = ld_acquire_sys(sig_ptr + slot)
    t0 = global_timer()
    while (v - target) < 0:
        v = ld_acquire_sys(sig_ptr + slot)
        if global_timer() - t0 > timeout_ns:
            tl.atomic_xchg(err_ptr + 1, rank)
            tl.atomic_xchg(err_ptr + 2, slot)
            tl.atomic_xchg(err_ptr + 3, v)
            tl.atomic_xchg(err_ptr + 4, target)
            tl.atomic_xchg(err_ptr + 0, 1)
            v = target
    return v


@triton.jit
def consume_token(x, token):
    """x, as a value that depends on token: loads addressed by it stay below the wait that made the token."""
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x, token], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def notify_slot(sig_ptr, slot):
    """Release-add 1 to this rank's sig[slot] at system scope, after every thread's stores."""
    tl.debug_barrier()
    tl.atomic_add(sig_ptr + slot, 1, sem="release", scope="sys")


@triton.jit
def peer_notify(sig_ptrs, peer, slot):
    """Release-add 1 to peer's sig[slot] (sig_ptrs: the signal buffer's peer-pointers table)."""
    sig = tl.load(sig_ptrs + peer).to(tl.pointer_type(tl.int32))
    tl.debug_barrier()
    tl.atomic_add(sig + slot, 1, sem="release", scope="sys")


@triton.jit
def peer_base(ptrs, peer):
    """Base pointer of peer's symmetric buffer (elements of bf16) from a peer-pointers table."""
    return tl.load(ptrs + peer).to(tl.pointer_type(tl.bfloat16))


@triton.jit
def peer_tile_load(ptrs, peer, offs, mask):
    """Load elements offs of peer's buffer (a tile_pull_data)."""
    return tl.load(peer_base(ptrs, peer) + offs, mask=mask)


@triton.jit
def peer_tile_store(ptrs, peer, offs, vals, mask):
    """Store vals at elements offs of peer's buffer (a tile_push_data)."""
    tl.store(peer_base(ptrs, peer) + offs, vals, mask=mask)


@triton.jit
def fence_proxy_async(token):
    """Order later TMA (async proxy) reads of global memory after the acquire that produced token; returns token."""
    return tl.inline_asm_elementwise("fence.proxy.async.global; mov.b32 $0, $1;", "=r,r", [token], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def task_peer_notify(sig_ptrs, peer, slot, BAR_ID: tl.constexpr, BAR_THREADS: tl.constexpr):
    """Release-add 1 to peer's sig[slot] after every store of this warp group (named barrier BAR_ID)."""
    sig = tl.load(sig_ptrs + peer).to(tl.pointer_type(tl.int32))
    tlx.named_barrier_wait(BAR_ID, BAR_THREADS)
    tl.atomic_add(sig + slot, 1, sem="release", scope="sys")


@triton.jit
def tlx_ag_gemm(a_ptr, b_ptr, c_ptr, M, N, K, slot_ptr, sig_ptr, err_ptr, rank, target, timeout_ns, order_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_CONSUMERS: tl.constexpr, GROUP_M: tl.constexpr):
    SPLIT_M: tl.constexpr = BLOCK_M // NUM_CONSUMERS
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[SPLIT_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, BLOCK_N])
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
            num_pid_in_group = GROUP_M * num_pid_n
            for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                first_m = (tile_id // num_pid_in_group) * GROUP_M
                group_size_m = min(num_pid_m - first_m, GROUP_M)
                visit_m = first_m + (tile_id % group_size_m)
                pid_n = (tile_id % num_pid_in_group) // group_size_m
                pid_m = tl.load(order_ptr + visit_m)
                offs_am = pid_m * BLOCK_M
                slot = tl.load(slot_ptr + pid_m)
                if slot >= 0:
                    tok = fence_proxy_async(wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns))
                    offs_am = consume_token(offs_am, tok)
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
                pid_m = tl.load(order_ptr + visit_m)
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
                # Epilogue: this consumer's rows of the tile, by TMA store.
                c_desc.store([offs_am + cid * SPLIT_M, offs_bn], acc.to(tl.bfloat16))
