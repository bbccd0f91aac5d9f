"""rs-reduce: out = sum over ranks of the partial slabs delivered here, waiting per (rank, m-block).

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
def rs_reduce(part_ptr, out_ptr, sig_ptr, slot_ptr, err_ptr, N, rank, target, timeout_ns, rows_per_rank, WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    blocks_per_slab = rows_per_rank // BLOCK_M
    num_pn = tl.cdiv(N, BLOCK_N)
    for t in range(tl.program_id(0), blocks_per_slab * num_pn, tl.num_programs(0)):
        mb = t // num_pn
        pn = t % num_pn
        rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = cols[None, :] < N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        off = rows[:, None] * N + cols[None, :]
        for p in tl.static_range(WORLD):
            slot = tl.load(slot_ptr + p * blocks_per_slab + mb)
            tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)
            slab = tl.multiple_of(part_ptr + consume_token(p * rows_per_rank * N, tok), 16)
            acc += tl.load(slab + off, mask=mask).to(tl.float32)
        tl.store(out_ptr + off, acc.to(tl.bfloat16), mask=mask)
