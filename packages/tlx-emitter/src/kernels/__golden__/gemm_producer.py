"""gemm-producer: C = A @ B stored locally; each tile then release-adds its m-block's tile-done slot.

Emitted by @ovl/tlx-emitter. Device primitives first, then the kernel.
"""
import triton
import triton.language as tl


@triton.jit
def ld_acquire_sys(ptr):
    """Load one int32 with acquire semantics at system scope (a peer's or the copy engine's release is seen)."""
    return tl.inline_asm_elementwise("ld.global.acquire.sys.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def global_timer():
    """Nanoseconds of the GPU global timer."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


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
def gemm_producer(a_ptr, b_ptr, c_ptr, order_ptr, notify_ptr, sig_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=False):
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        visit_m = first_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        pid_m = tl.load(order_ptr + visit_m)
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([pid_m * BLOCK_M, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = offs_bn + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16), mask=mask)
        slot = tl.load(notify_ptr + pid_m)
        if slot >= 0:
            notify_slot(sig_ptr, slot)
