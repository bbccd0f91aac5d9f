"""MoE part 2 (``moe-rs``): GroupGEMM + Scatter + TopK-reduce + ReduceScatter with the routing on the device.

Tensor-parallel experts: rank r holds the ``I/W`` slice of every expert. Inputs per rank:
``h [T·k, I/W]`` (part 1's activations, rows in token-slot order ``t·k + j``, all T tokens),
``W2 [E, I/W, H]``; ``topk_ids [T, k]`` int32 and ``topk_weights [T, k]`` are the same on every
rank. Output per rank r: its ``T/W`` token rows of
``Σ_ranks Σ_j topk_weights[t, j] · (h_r[t·k + j] @ W2_r[topk_ids[t, j]])``.

Design (the tile schedule of TileLink's MoE part 2, §4.1 dynamic mappings):

- **Routing tables** come from ``moe_align`` (``sorted_token_ids``, ``expert_of_block``,
  ``num_blocks``), launched on the device before the body; no host sync.
- **Slabs.** The T tokens are cut into slabs of ``slab_t`` tokens (``slab_t`` divides ``T/W``);
  slab s belongs to rank ``s // (T / W / slab_t)``. Slab s has one signal slot on its owner.
- **Expected notifies, on the device** (``moe_slab_expect``): a valid block's slots ascend, so
  its tokens cover the slabs ``slab(first) .. slab(last)``. Every (block, n-tile) of every rank
  notifies each slab of that range once, so slab s collects ``W · n_tiles · cover(s)``
  notifies per launch, ``cover(s)`` the number of blocks whose range holds s (the same on
  every rank: the routing is). The kernel adds that to the rank's ``expect [S]``: signal slots
  are never reset, the wait target is the running total (compared wrap-aware in int32).
- **Producer** (``moe_gemm_scatter``, the group GEMM body): per (block, n-tile),
  ``acc = h[slots] @ W2[expert][:, n-tile]``, each row scaled by ``topk_weights`` of its slot,
  stored at its slot row of the rank's symmetric ``partial [T·k, H]`` (the scatter to token
  positions), then a release-add to the slot of each covered slab on the slab's owner.
- **TopK-reduce + ReduceScatter** (``moe_topk_reduce_rs``) on each slab owner: a program per
  (slab, token block, n-tile) waits (bounded, ``language.wait_slot``) until its slab reached its
  target, then sums the k slots of each token over every rank's ``partial`` (pulled through the
  peer-pointers table) into the owner's output rows. The reduce of slab s starts as soon as slab s
  is complete everywhere, while the producers still work on later blocks.

A launch starts after the previous launch's reduce finished on every rank (the runner's
per-launch barrier): the producers overwrite ``partial``. ``topk_ids`` must lie in ``[0, E)``:
a dropped slot's ``partial`` row would not be written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import triton
import triton.language as tl

from .errors import WaitTimeout
from .language import consume_token, load_epoch_target, notify_slot_gpu, peer_base, wait_slot
from .moe import check_sizes, slab_cover_reference

__all__ = [
    "MoeRsSizes",
    "check_moe_rs",
    "moe_gemm_scatter",
    "moe_rs_one_device",
    "moe_rs_reference",
    "moe_rs_rank",
    "moe_rs_reference_torch",
    "moe_slab_expect",
    "moe_topk_reduce_rs",
    "raise_timeouts_of",
    "slab_cover_reference",
]

#: Blocks ``moe_slab_expect`` looks at per step.
EXPECT_STEP = 16


@dataclass(frozen=True)
class MoeRsSizes:
    """Sizes of a moe-rs problem (per rank: ``h [T·k, I]``, ``W2 [E, I, H]``)."""

    tokens: int
    topk: int
    experts: int
    inter: int
    hidden: int
    world: int
    slab_t: int

    @property
    def rows_per_rank(self) -> int:
        """``T / W``: the token rows each rank owns."""
        return self.tokens // self.world

    @property
    def slabs(self) -> int:
        """Slabs in all (``T / slab_t``)."""
        return self.tokens // self.slab_t

    @property
    def slabs_per_rank(self) -> int:
        """Slabs each rank owns."""
        return self.rows_per_rank // self.slab_t


def check_moe_rs(tokens: int, topk: int, experts: int, inter: int, hidden: int, world: int, slab_t: int | None = None) -> MoeRsSizes:
    """The sizes, after checking them (before any launch). ``slab_t`` defaults to ``T/W`` (one slab per rank).

    @raises ValueError naming the bad size: top-k above the experts, T not divisible by the world, a slab
    that does not divide ``T/W``.
    """
    check_sizes(tokens, topk, experts, 16)
    for name, v in (("I/W", inter), ("H", hidden), ("world", world)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"moe-rs: {name} must be a positive integer, got {v!r}")
    if tokens % world:
        raise ValueError(f"moe-rs: the tokens ({tokens}) must divide evenly over the world ({world}): each rank owns T/W rows")
    per = tokens // world
    slab = per if slab_t is None else slab_t
    if isinstance(slab, bool) or not isinstance(slab, int) or slab < 1 or per % slab:
        raise ValueError(f"moe-rs: the slab ({slab!r} tokens) must be a positive divisor of T/W = {per}")
    return MoeRsSizes(tokens, topk, experts, inter, hidden, world, slab)


def moe_rs_reference(h: list[np.ndarray], w2: list[np.ndarray], topk_ids: np.ndarray, topk_weights: np.ndarray) -> list[np.ndarray]:
    """Each rank's output rows in numpy (float64): ``h[r] [T·k, I]``, ``w2[r] [E, I, H]``."""
    T, k = topk_ids.shape
    world = len(h)
    flat = topk_ids.reshape(-1)
    wts = topk_weights.reshape(-1).astype(np.float64)
    total = np.zeros((T, w2[0].shape[2]), dtype=np.float64)
    for hr, wr in zip(h, w2, strict=True):
        y = np.zeros((T * k, wr.shape[2]), dtype=np.float64)
        for e in np.unique(flat):
            slots = np.nonzero(flat == e)[0]
            y[slots] = hr[slots].astype(np.float64) @ wr[int(e)].astype(np.float64)
        total += (y * wts[:, None]).reshape(T, k, -1).sum(axis=1)
    per = T // world
    return [total[r * per : (r + 1) * per] for r in range(world)]


def moe_rs_reference_torch(h: Any, w2: Any, topk_ids: Any, topk_weights: Any) -> Any:
    """The outputs ``[W, T/W, H]`` in torch (fp32 accumulation): ``h [W, T·k, I]``, ``w2 [W, E, I, H]``."""
    import torch

    world, slots, _ = h.shape
    T, k = topk_ids.shape
    flat = topk_ids.reshape(-1).long()
    y = torch.zeros((world, slots, w2.shape[-1]), dtype=torch.float32, device=h.device)
    for e in torch.unique(flat).tolist():
        idx = torch.nonzero(flat == e).squeeze(1)
        y[:, idx] = torch.bmm(h[:, idx].float(), w2[:, e].float())
    y = y * topk_weights.reshape(1, -1, 1).float()
    return y.sum(0).reshape(T, k, -1).sum(1).reshape(world, T // world, -1)


@triton.jit
def moe_slab_expect(
    sorted_ids,
    num_blocks_ptr,
    expect_ptr,
    sig_ptr,
    READY_SLOT,
    SLOTS,
    NOTIFIES,
    SLAB_T,
    NUM_SLABS,
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    SLABS_P2: tl.constexpr,
    STEP: tl.constexpr,
):
    """One program: ``expect[s] += NOTIFIES · cover(s)`` (NOTIFIES = world × n-tiles), cover(s) the valid
    blocks whose tokens' slab range holds s; then one release add to this rank's ``sig[READY_SLOT]`` (gpu
    scope: only this rank's reducer, on another stream, waits on it before reading ``expect``)."""
    nb = tl.load(num_blocks_ptr)
    slabs = tl.arange(0, SLABS_P2)
    cover = tl.zeros((SLABS_P2,), dtype=tl.int32)
    for b0 in range(0, nb, STEP):
        blocks = b0 + tl.arange(0, STEP)
        entries = tl.load(sorted_ids + blocks[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :], mask=blocks[:, None] < nb, other=SLOTS)
        valid = entries < SLOTS
        first = tl.min(tl.where(valid, entries, SLOTS), axis=1) // TOP_K // SLAB_T
        last = tl.max(tl.where(valid, entries, -1), axis=1) // TOP_K // SLAB_T
        inside = (slabs[None, :] >= first[:, None]) & (slabs[None, :] <= last[:, None]) & (blocks[:, None] < nb)
        cover += tl.sum(inside.to(tl.int32), axis=0)
    mine = slabs < NUM_SLABS
    old = tl.load(expect_ptr + slabs, mask=mine, other=0)
    tl.store(expect_ptr + slabs, old + cover * NOTIFIES, mask=mine)
    notify_slot_gpu(sig_ptr, READY_SLOT)


@triton.jit
def moe_gemm_scatter(
    h_ptr,
    w_ptr,
    weights_ptr,
    partial_ptr,
    sorted_token_ids,
    expert_of_block,
    num_blocks_ptr,
    sig_ptrs,
    N,
    K,
    SLOTS,
    SLAB_T,
    SLABS_PER_RANK,
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    """The group GEMM producer: per (block, n-tile) the weighted rows ``w[slot] · h[slot] @ W2[e]`` at their slot
    rows of ``partial``, then a release-add to every covered slab's slot on its owner (``sig_ptrs``: peer table)."""
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = tl.load(num_blocks_ptr) * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS):
        pid_m = tile_id // num_pid_n
        pid_n = tile_id % num_pid_n
        expert = tl.load(expert_of_block + pid_m).to(tl.int64)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        slots = tl.load(sorted_token_ids + offs_m)
        valid = slots < SLOTS
        rows = tl.where(valid, slots, 0).to(tl.int64)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = h_ptr + rows[:, None] * K + offs_k[None, :]
        b_ptrs = w_ptr + expert * K * N + offs_k[:, None] * N + offs_n[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            k_left = K - ki * BLOCK_K
            a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
        wts = tl.load(weights_ptr + rows, mask=valid, other=0.0).to(tl.float32)
        acc = acc * wts[:, None]
        c_ptrs = partial_ptr + rows[:, None] * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(partial_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < N))
        first = tl.min(tl.where(valid, slots, SLOTS), axis=0) // TOP_K // SLAB_T
        last = tl.max(tl.where(valid, slots, -1), axis=0) // TOP_K // SLAB_T
        tl.debug_barrier()
        for s in range(first, last + 1):
            sig = tl.load(sig_ptrs + s // SLABS_PER_RANK).to(tl.pointer_type(tl.int32))
            tl.atomic_add(sig + s, 1, sem="release", scope="sys")


@triton.jit
def moe_topk_reduce_rs(
    partial_ptrs,
    like_ptr,
    out_ptr,
    sig_ptr,
    expect_ptr,
    err_ptr,
    rank,
    epoch_ptr,
    timeout_ns,
    N,
    SLAB_T,
    SLABS_PER_RANK,
    READY_SLOT,
    TOP_K: tl.constexpr,
    WORLD: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
):
    """Persistent: first a bounded wait until this launch's ``moe_slab_expect`` signalled ``sig[READY_SLOT]``
    (the epoch word's target; it runs on another stream), then items (slab, token block, n-tile) of this rank
    in slab order, each waiting until its slab reached its target (read through the READY wait's token), then
    ``out[t] = Σ_ranks Σ_j partial_r[t·k + j]`` for its tokens (``partial_ptrs``: the peer table). Few
    programs: spinning ones must leave the producers room."""
    ready = wait_slot(sig_ptr, READY_SLOT, load_epoch_target(epoch_ptr, 1), err_ptr, rank, timeout_ns)
    t_blocks = tl.cdiv(SLAB_T, BLOCK_T)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    items = SLABS_PER_RANK * t_blocks * num_pid_n
    for item in tl.range(tl.program_id(0), items, NUM_PROGRAMS):
        ls = item // (t_blocks * num_pid_n)
        tb = (item // num_pid_n) % t_blocks
        pid_n = item % num_pid_n
        s = rank * SLABS_PER_RANK + ls
        token = wait_slot(sig_ptr, s, tl.load(expect_ptr + consume_token(s, ready)), err_ptr, rank, timeout_ns)
        local = ls * SLAB_T + tb * BLOCK_T + tl.arange(0, BLOCK_T)
        inside = local < (ls + 1) * SLAB_T
        tokens = consume_token(s * SLAB_T + tb * BLOCK_T, token).to(tl.int64) + tl.arange(0, BLOCK_T)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = inside[:, None] & (offs_n[None, :] < N)
        acc = tl.zeros((BLOCK_T, BLOCK_N), dtype=tl.float32)
        for r in tl.static_range(WORLD):
            base = peer_base(partial_ptrs, r, like_ptr)
            for j in tl.static_range(TOP_K):
                acc += tl.load(base + (tokens * TOP_K + j)[:, None] * N + offs_n[None, :], mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + local.to(tl.int64)[:, None] * N + offs_n[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)


def moe_rs_one_device(
    h: Any,
    w2: Any,
    topk_ids: Any,
    topk_weights: Any,
    *,
    slab_t: int | None = None,
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 32,
    block_t: int = 16,
    num_sms: int = 4,
    reduce_programs: int = 4,
    timeout_ns: int = 10_000_000_000,
    state: dict[str, Any] | None = None,
    raise_timeouts: bool = True,
) -> Any:
    """All W ranks of moe-rs on one device (every rank's buffers on it): ``h [W, T·k, I]``, ``w2 [W, E, I, H]``,
    ``topk_ids [T, k]`` int32, ``topk_weights [T, k]``. Returns the outputs ``[W, T/W, H]``.

    On a CPU tensor the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``), rank after rank
    (producers, then reducers); on a GPU the producers run on the current stream and the reducers on a
    second stream, overlapping them. ``num_sms``: programs of each rank's producer; ``reduce_programs``: of each
    rank's (persistent) reducer. ``state`` keeps the signal slots, wait targets, ``partial`` and the peer tables
    across calls of one shape (signal slots are never reset). ``raise_timeouts``: read the error words back
    after the launch (a host sync) and raise ``WaitTimeout``; else :func:`raise_timeouts_of` does it later.
    @raises ValueError for bad shapes or sizes, before any launch.
    """
    import torch

    from .moe_align import DEFAULT_PROGRAMS, moe_align_block_size

    if h.dim() != 3 or w2.dim() != 4 or w2.shape[0] != h.shape[0] or w2.shape[2] != h.shape[2]:
        raise ValueError(
            f"moe-rs: h must be [W, T·k, I] and w2 [W, E, I, H] with the same W and I, got {tuple(h.shape)} and {tuple(w2.shape)}"
        )
    if topk_ids.dim() != 2 or topk_ids.dtype != torch.int32 or tuple(topk_weights.shape) != tuple(topk_ids.shape):
        raise ValueError(
            f"moe-rs: topk_ids must be int32 [T, k] and topk_weights the same shape, got {tuple(topk_ids.shape)} {topk_ids.dtype} and {tuple(topk_weights.shape)}"
        )
    world, slots, inter = (int(x) for x in h.shape)
    T, k = (int(x) for x in topk_ids.shape)
    E, H = int(w2.shape[1]), int(w2.shape[3])
    sz = check_moe_rs(T, k, E, inter, H, world, slab_t)
    if slots != T * k:
        raise ValueError(f"moe-rs: h has {slots} rows; T·k = {T * k}")
    dev = h.device
    st = state if state is not None else {}
    shape = (sz, h.dtype, dev)
    if st.get("shape") != shape:
        st.clear()
        st["shape"] = shape
        st["sig"] = torch.zeros((world, sz.slabs + 1), dtype=torch.int32, device=dev)  # slot READY = slabs last
        st["epoch"] = torch.zeros((world, 1), dtype=torch.int32, device=dev)
        st["expect"] = torch.zeros((world, sz.slabs), dtype=torch.int32, device=dev)
        st["err"] = torch.zeros((world, 8), dtype=torch.int32, device=dev)
        st["partial"] = torch.empty((world, slots, H), dtype=h.dtype, device=dev)
        st["sig_ptrs"] = torch.tensor([st["sig"][r].data_ptr() for r in range(world)], dtype=torch.int64, device=dev)
        st["partial_ptrs"] = torch.tensor([st["partial"][r].data_ptr() for r in range(world)], dtype=torch.int64, device=dev)
        st["side"] = torch.cuda.Stream(device=dev) if dev.type == "cuda" else None
    sig, expect, err, partial, side = st["sig"], st["expect"], st["err"], st["partial"], st["side"]
    sig_ptrs, partial_ptrs = st["sig_ptrs"], st["partial_ptrs"]
    out = torch.empty((world, sz.rows_per_rank, H), dtype=h.dtype, device=dev)
    weights = topk_weights.reshape(-1).to(torch.float32).contiguous()
    ids = topk_ids.contiguous()
    h, w2 = h.contiguous(), w2.contiguous()
    num_pid_n = triton.cdiv(H, block_n)
    items = sz.slabs_per_rank * triton.cdiv(sz.slab_t, block_t) * num_pid_n
    reducers = max(1, min(reduce_programs, items))

    epoch = st["epoch"]

    def launch() -> None:
        epoch.add_(1)
        sorted_ids, expert_of_block, num_blocks = moe_align_block_size(ids, E, block_m, programs=DEFAULT_PROGRAMS)
        for r in range(world):
            moe_slab_expect[(1,)](
                sorted_ids, num_blocks, expect[r], sig[r], sz.slabs, T * k, world * num_pid_n, sz.slab_t, sz.slabs,
                TOP_K=k, BLOCK_M=block_m, SLABS_P2=max(2, triton.next_power_of_2(sz.slabs)), STEP=EXPECT_STEP,
            )  # fmt: skip
        if side is not None:  # the reducers wait for the targets only; the producers run beside them
            side.wait_stream(torch.cuda.current_stream())
        max_tiles = triton.cdiv(T * k + E * (block_m - 1), block_m) * num_pid_n
        for r in range(world):
            moe_gemm_scatter[(min(num_sms, max_tiles),)](
                h[r], w2[r], weights, partial[r], sorted_ids, expert_of_block, num_blocks, sig_ptrs,
                H, inter, T * k, sz.slab_t, sz.slabs_per_rank,
                TOP_K=k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, NUM_SMS=min(num_sms, max_tiles),
            )  # fmt: skip
        ctx = torch.cuda.stream(side) if side is not None else _null()
        with ctx:
            for r in range(world):
                moe_topk_reduce_rs[(reducers,)](
                    partial_ptrs, partial[r], out[r], sig[r], expect[r], err[r], r, epoch[r], timeout_ns,
                    H, sz.slab_t, sz.slabs_per_rank, sz.slabs,
                    TOP_K=k, WORLD=world, BLOCK_T=block_t, BLOCK_N=block_n, NUM_PROGRAMS=reducers,
                )  # fmt: skip
        if side is not None:
            torch.cuda.current_stream().wait_stream(side)

    if dev.type == "cpu":
        from .interpret_patch import patched

        with patched():
            launch()
    else:
        launch()
    if raise_timeouts:
        raise_timeouts_of(st)
    return out


def raise_timeouts_of(state: dict[str, Any]) -> None:
    """Raise the first recorded wait timeout of a ``moe_rs_one_device`` state (reads its error words: a host sync).

    @raises WaitTimeout (rank, slab slot, value seen and the target)."""
    err = state.get("err")
    if err is None:
        return
    words = err.cpu()
    for row in words.tolist():
        if row[0] != 0:
            raise WaitTimeout(row[1], row[2], row[3], row[4], "moe_topk_reduce_rs")


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: object) -> None:
        return None


def moe_rs_rank(
    h: Any,
    w2: Any,
    topk_ids: Any,
    topk_weights: Any,
    group: Any,
    *,
    slab_t: int | None = None,
    block_m: int = 64,
    block_n: int = 128,
    block_k: int = 64,
    block_t: int = 32,
    num_sms: int = 128,
    reduce_programs: int = 4,
    timeout_ns: int = 10_000_000_000,
    state: dict[str, Any] | None = None,
) -> Any:
    """This process's rank of moe-rs over a ``torch.distributed`` process group (one rank per GPU): ``h [T·k, I]``,
    ``w2 [E, I, H]``, ``topk_ids`` / ``topk_weights [T, k]`` (the same on every rank). Returns this rank's
    ``[T/W, H]``. ``partial`` and the signal slots live in symmetric memory (``torch.distributed._symmetric_memory``),
    rendezvoused on the first call of a shape; every call starts with the handle's device barrier, so no rank
    overwrites its ``partial`` while a peer still reduces the previous call's. Asynchronous on the current stream;
    :func:`raise_timeouts_of` reads the error words later. @raises ValueError for bad shapes, before any launch."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from .moe_align import DEFAULT_PROGRAMS, moe_align_block_size

    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if h.dim() != 2 or w2.dim() != 3 or w2.shape[1] != h.shape[1]:
        raise ValueError(f"moe-rs: h must be [T·k, I] and w2 [E, I, H] with the same I, got {tuple(h.shape)} and {tuple(w2.shape)}")
    if topk_ids.dim() != 2 or topk_ids.dtype != torch.int32 or tuple(topk_weights.shape) != tuple(topk_ids.shape):
        raise ValueError(
            f"moe-rs: topk_ids must be int32 [T, k] and topk_weights the same shape, got {tuple(topk_ids.shape)} {topk_ids.dtype}"
        )
    slots, inter = (int(x) for x in h.shape)
    T, k = (int(x) for x in topk_ids.shape)
    E, H = int(w2.shape[0]), int(w2.shape[2])
    sz = check_moe_rs(T, k, E, inter, H, world, slab_t)
    if slots != T * k:
        raise ValueError(f"moe-rs: h has {slots} rows; T·k = {T * k}")
    st = state if state is not None else {}
    shape = (sz, h.dtype, h.device)
    if st.get("shape") != shape:
        st.clear()
        st["shape"] = shape
        name = group.group_name if group is not None else dist.group.WORLD.group_name
        st["partial"] = symm_mem.empty(slots, H, dtype=h.dtype, device=h.device)
        st["partial_h"] = symm_mem.rendezvous(st["partial"], name)
        st["sig"] = symm_mem.empty(sz.slabs + 1, dtype=torch.int32, device=h.device)  # slot READY = slabs last
        st["sig"].zero_()
        st["sig_h"] = symm_mem.rendezvous(st["sig"], name)
        st["expect"] = torch.zeros(sz.slabs, dtype=torch.int32, device=h.device)
        st["epoch"] = torch.zeros(1, dtype=torch.int32, device=h.device)
        st["err"] = torch.zeros(8, dtype=torch.int32, device=h.device)
        st["partial_ptrs"] = torch.tensor(list(st["partial_h"].buffer_ptrs), dtype=torch.int64, device=h.device)
        st["sig_ptrs"] = torch.tensor(list(st["sig_h"].buffer_ptrs), dtype=torch.int64, device=h.device)
        st["side"] = torch.cuda.Stream(device=h.device)
        torch.cuda.synchronize()
        dist.barrier(group=group)  # every rank's signal slots are zero before any peer adds to them
    partial, sig, expect, err, side = st["partial"], st["sig"], st["expect"], st["err"], st["side"]
    out = torch.empty((sz.rows_per_rank, H), dtype=h.dtype, device=h.device)
    weights = topk_weights.reshape(-1).to(torch.float32).contiguous()
    ids, h, w2 = topk_ids.contiguous(), h.contiguous(), w2.contiguous()
    num_pid_n = triton.cdiv(H, block_n)
    items = sz.slabs_per_rank * triton.cdiv(sz.slab_t, block_t) * num_pid_n
    reducers = max(1, min(reduce_programs, items))
    max_tiles = triton.cdiv(T * k + E * (block_m - 1), block_m) * num_pid_n
    producers = max(1, min(num_sms, max_tiles))
    st["partial_h"].barrier(channel=0)
    st["epoch"].add_(1)
    sorted_ids, expert_of_block, num_blocks = moe_align_block_size(ids, E, block_m, programs=DEFAULT_PROGRAMS)
    moe_slab_expect[(1,)](
        sorted_ids, num_blocks, expect, sig, sz.slabs, T * k, world * num_pid_n, sz.slab_t, sz.slabs,
        TOP_K=k, BLOCK_M=block_m, SLABS_P2=max(2, triton.next_power_of_2(sz.slabs)), STEP=EXPECT_STEP,
    )  # fmt: skip
    side.wait_stream(torch.cuda.current_stream())
    moe_gemm_scatter[(producers,)](
        h, w2, weights, partial, sorted_ids, expert_of_block, num_blocks, st["sig_ptrs"],
        H, inter, T * k, sz.slab_t, sz.slabs_per_rank,
        TOP_K=k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, NUM_SMS=producers,
    )  # fmt: skip
    with torch.cuda.stream(side):
        moe_topk_reduce_rs[(reducers,)](
            st["partial_ptrs"], partial, out, sig, expect, err, rank, st["epoch"], timeout_ns,
            H, sz.slab_t, sz.slabs_per_rank, sz.slabs,
            TOP_K=k, WORLD=world, BLOCK_T=block_t, BLOCK_N=block_n, NUM_PROGRAMS=reducers,
        )  # fmt: skip
    torch.cuda.current_stream().wait_stream(side)
    return out
