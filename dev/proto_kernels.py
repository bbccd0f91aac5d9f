"""Prototype overlapped kernels (hand-written) to establish the device-side design."""
import triton
import triton.language as tl


@triton.jit
def ld_acquire_sys(ptr):
    return tl.inline_asm_elementwise(
        "ld.global.acquire.sys.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def global_timer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns):
    """Acquire-spin until sig[slot] reaches target (wrap-aware); bounded by timeout_ns.
    On timeout records (1, rank, slot, seen, target) in err_ptr and returns."""
    v = ld_acquire_sys(sig_ptr + slot)
    t0 = global_timer()
    while ((v - target) < 0):
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
    """Returns x, but as a value that depends on token, so that loads using it cannot be
    hoisted above the wait that produced the token."""
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x, token], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def ag_gemm_consumer(a_ptr, b_ptr, c_ptr, order_ptr, slot_ptr, sig_ptr, err_ptr,
                     M, N, K, rank, target, timeout_ns,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, WAIT: tl.constexpr):
    """Persistent TMA GEMM C[M,N] = A[M,K] @ B[K,N] visiting m-blocks in order_ptr's order,
    waiting per tile on the chunk signal slot_ptr[m_block] (-1 = local, no wait)."""
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=False):
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        visit_m = first_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        pid_m = tl.load(order_ptr + visit_m)
        offs_am = pid_m * BLOCK_M
        if WAIT:
            slot = tl.load(slot_ptr + pid_m)
            if slot >= 0:
                tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)
                offs_am = consume_token(offs_am, tok)
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, offs_bn], acc.to(tl.bfloat16))


@triton.jit
def gemm_rs_producer(a_ptr, b_ptr, order_ptr, peer_ptrs, sig_ptrs,
                     M, N, K, rank, WORLD: tl.constexpr, rows_per_rank,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    """Persistent TMA GEMM producing partial C = A @ B; each finished tile is stored into the
    owner rank's partials[rank] (symmetric [WORLD, rows_per_rank, N]) and notifies the
    owner's slot (rank * num_pid_m_slab + m_block_in_slab) with a release add."""
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    num_pid_in_group = GROUP_M * num_pid_n
    blocks_per_slab = rows_per_rank // BLOCK_M
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=False):
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        visit_m = first_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        pid_m = tl.load(order_ptr + visit_m)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([pid_m * BLOCK_M, offs_k])
            b = b_desc.load([offs_k, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        owner = pid_m // blocks_per_slab
        mb = pid_m % blocks_per_slab
        dst = tl.load(peer_ptrs + owner).to(tl.pointer_type(tl.bfloat16))
        rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ptrs = dst + rank * rows_per_rank * N + rows[:, None] * N + cols[None, :]
        tl.store(ptrs, acc.to(tl.bfloat16), mask=cols[None, :] < N)
        tl.debug_barrier()
        sig = tl.load(sig_ptrs + owner).to(tl.pointer_type(tl.int32))
        tl.atomic_add(sig + rank * blocks_per_slab + mb, 1, sem="release", scope="sys")


@triton.jit
def rs_reduce(part_ptr, out_ptr, sig_ptr, err_ptr, N, rank, target, timeout_ns, rows_per_rank,
              WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[slab] = sum over ranks p of partials[p] (this rank's slab), waiting per m-block on
    each peer's arrival slot (target = epoch * n-tiles)."""
    mb = tl.program_id(0)
    pn = tl.program_id(1)
    blocks_per_slab = rows_per_rank // BLOCK_M
    rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for p in range(WORLD):
        off = rows[:, None] * N + cols[None, :]
        tok = wait_slot(sig_ptr, p * blocks_per_slab + mb, target, err_ptr, rank, timeout_ns)
        off = consume_token(off, tok)
        acc += tl.load(part_ptr + p * rows_per_rank * N + off, mask=mask).to(tl.float32)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16), mask=mask)
