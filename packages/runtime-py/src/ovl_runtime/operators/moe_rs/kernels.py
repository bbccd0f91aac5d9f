"""MoE part 2 (``moe-rs``): GroupGEMM + Scatter + TopK-reduce + ReduceScatter with the routing on the device.

Tensor-parallel experts: rank r holds the ``I/W`` slice of every expert. Inputs per rank:
``h [T·k, I/W]`` (part 1's activations, rows in token-slot order ``t·k + j``, all T tokens),
``W2 [E, I/W, H]``; ``topk_ids [T, k]`` int32 and ``topk_weights [T, k]`` are the same on every
rank. Output per rank r: its ``T/W`` token rows of
``Σ_ranks Σ_j topk_weights[t, j] · (h_r[t·k + j] @ W2_r[topk_ids[t, j]])``.

Design (the tile schedule of TileLink's MoE part 2, §4.1 dynamic mappings):

- **Routing tables** come from ``operators.ag_moe.routing_kernels`` (``sorted_token_ids``, ``expert_of_block``,
  ``num_blocks``), launched on the device before the body; no host sync.
- **Slabs.** The T tokens are cut into slabs of ``slab_t`` tokens (``slab_t`` divides ``T/W``);
  slab s belongs to rank ``s // (T / W / slab_t)``. Slab s has one signal slot on its owner.
- **Expected notifies, on the device** (``moe_slab_expect``): a valid block's slots ascend, so
  its tokens cover the slabs ``slab(first) .. slab(last)``. Every (block, n-tile) of every rank
  notifies each slab of that range once, so slab s collects ``W · n_tiles · cover(s)``
  notifies per launch, ``cover(s)`` the number of blocks whose range holds s (the same on
  every rank: the routing is). The kernel adds that to the rank's ``expect [S]``: signal slots
  are never reset, the wait target is the running total (compared wrap-aware in int32).
- **Producer**: the compiled body (``ovl emit moe-rs``: ``@ovl/tlx-emitter``'s built-in
  ``kernels/moe_gemm_scatter.py`` with the notifies inserted by the compiler): per (block, n-tile),
  ``acc = h[slots] @ W2[expert][:, n-tile]``, each row scaled by ``topk_weights`` of its slot,
  stored at its slot row of the rank's symmetric ``partial [T·k, H]`` (the scatter to token
  positions), then a release-add to the slot of each covered slab on the slab's owner.
- **Per launch instead** (the default body, ``kernels/moe_gemm_scatter_ws.py``): a body whose tile
  loop Triton warp-specialises takes no notifies (Triton 3.6 drops, repeats or hoists the atomics in
  and around such a loop), so ``moe_slab_notify`` after it on the compute stream adds 1 to every slab
  on its owner, and ``moe_slab_expect`` (``PER_BLOCK`` off) adds ``W`` to every slab's target. Such a
  body reads h in the routing's block order: ``moe_permute_rows`` fills it after the routing. Before
  the notify, ``moe_topk_sum`` sums each token's k rows locally into the symmetric ``partial_tok
  [T, H]``, and the reducer (``TOP_K`` 1) follows on the compute stream on every SM, pulling token
  rows: ``k`` times fewer bytes over the links than the slot rows.
- **Ready slot.** ``moe_slab_expect`` ends with a gpu-scope release add to the rank's slot
  ``READY`` (= the slab count); the reducer (per tile on another stream) first waits for it to reach
  the launch's epoch target, so it reads this launch's targets.
- **TopK-reduce + ReduceScatter** (``moe_topk_reduce_rs``) on each slab owner: a program per
  (slab, token block, n-tile) waits (bounded, ``language.wait_slot``) until its slab reached its
  target, then sums the k slots of each token over every rank's ``partial`` (pulled through the
  peer-pointers table) into the owner's output rows. The reduce of slab s starts as soon as slab s
  is complete everywhere, while the producers still work on later blocks.

This module holds the runner's kernels of the manifest (``moe_permute_rows``, ``moe_slab_expect``,
``moe_topk_sum``, ``moe_slab_notify``, ``moe_topk_reduce_rs``), the sizes check and the references. A
launch starts after the previous launch's reduce finished on every rank (the runner's per-launch
barrier): the producers overwrite ``partial``. ``topk_ids`` must lie in ``[0, E)``: a dropped slot's
``partial`` row would not be written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import triton
import triton.language as tl

from ...language import consume_token, load_epoch_target, notify_slot_gpu, peer_base, wait_slot
from ..ag_moe.routing import check_sizes, slab_cover_reference

__all__ = [
    "MoeRsSizes",
    "check_moe_rs",
    "moe_rs_reference",
    "moe_rs_reference_torch",
    "moe_permute_rows",
    "moe_permute_rows_rows",
    "moe_slab_expect",
    "moe_slab_expect_rows",
    "moe_slab_notify",
    "moe_topk_reduce_rs",
    "moe_topk_reduce_rs_rows",
    "moe_topk_sum",
    "moe_topk_sum_rows",
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
    PER_BLOCK: tl.constexpr = True,
):
    """One program: ``expect[s] += NOTIFIES · cover(s)`` (NOTIFIES = world × n-tiles), cover(s) the valid
    blocks whose tokens' slab range holds s; then one release add to this rank's ``sig[READY_SLOT]`` (gpu
    scope: only this rank's reducer, on another stream, waits on it before reading ``expect``). Without
    ``PER_BLOCK`` (a producer notified once per launch by ``moe_slab_notify``) cover(s) is 1 for every slab
    and NOTIFIES the world."""
    nb = tl.load(num_blocks_ptr)
    slabs = tl.arange(0, SLABS_P2)
    cover = tl.zeros((SLABS_P2,), dtype=tl.int32)
    if PER_BLOCK:
        for b0 in range(0, nb, STEP):
            blocks = b0 + tl.arange(0, STEP)
            entries = tl.load(
                sorted_ids + blocks[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :], mask=blocks[:, None] < nb, other=SLOTS
            )
            valid = entries < SLOTS
            first = tl.min(tl.where(valid, entries, SLOTS), axis=1) // TOP_K // SLAB_T
            last = tl.max(tl.where(valid, entries, -1), axis=1) // TOP_K // SLAB_T
            inside = (slabs[None, :] >= first[:, None]) & (slabs[None, :] <= last[:, None]) & (blocks[:, None] < nb)
            cover += tl.sum(inside.to(tl.int32), axis=0)
    else:
        cover += 1
    mine = slabs < NUM_SLABS
    old = tl.load(expect_ptr + slabs, mask=mine, other=0)
    tl.store(expect_ptr + slabs, old + cover * NOTIFIES, mask=mine)
    notify_slot_gpu(sig_ptr, READY_SLOT)


@triton.jit
def moe_slab_notify(sig_ptrs, SLABS_PER_RANK, NUM_SLABS, SLABS_P2: tl.constexpr):
    """The notify of a whole producer launch (a warp-specialised body, whose tile loop holds no atomics): one
    program, after the producer on the same stream (so its stores are complete), release-adds 1 at system
    scope to every slab's slot on the slab's owner (``sig_ptrs``: the signal buffer's peer-pointers table)."""
    s = tl.arange(0, SLABS_P2)
    mine = s < NUM_SLABS
    ptrs = tl.load(sig_ptrs + s // SLABS_PER_RANK, mask=mine, other=0).to(tl.pointer_type(tl.int32))
    tl.atomic_add(ptrs + s, 1, mask=mine, sem="release", scope="sys")


@triton.jit
def moe_topk_sum(partial_ptr, out_ptr, T, N, TOP_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr):
    """The local TopK-reduce of a launch-notified producer: ``out[t] = Σ_j partial[t·k + j]`` (fp32 sum of
    the weighted slot rows, stored in ``out``'s type), a program per (token block, column block), so the
    owners pull ``[T/W, N]`` token rows from each rank instead of ``k`` times as many slot rows."""
    n_blocks = tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0)
    tokens = (pid // n_blocks).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = (pid % n_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (tokens[:, None] < T) & (cols[None, :] < N)
    acc = tl.zeros((BLOCK_T, BLOCK_N), dtype=tl.float32)
    for j in tl.static_range(TOP_K):
        acc += tl.load(partial_ptr + (tokens * TOP_K + j)[:, None] * N + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + tokens[:, None] * N + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def moe_permute_rows(src_ptr, dst_ptr, sorted_ids, num_blocks_ptr, SLOTS, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """``dst`` in the routing's block order: program b copies, for a valid block b, ``dst[b·BLOCK_M + i] =
    src[sorted_ids[b·BLOCK_M + i]]`` (a slot row of ``src [SLOTS, K]``), zeros for the padding entries; a
    program past the valid blocks does nothing. What a body reading its rows in block order
    (``# ovl: producer ... blocks=<param>``) needs when the rows come in slot order."""
    b = tl.program_id(0)
    if b < tl.load(num_blocks_ptr):
        pos = b.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        slot = tl.load(sorted_ids + pos)
        valid = slot < SLOTS
        rows = tl.where(valid, slot, 0).to(tl.int64)
        for k0 in range(0, K, BLOCK_K):
            cols = k0 + tl.arange(0, BLOCK_K)
            inside = cols[None, :] < K
            v = tl.load(src_ptr + rows[:, None] * K + cols[None, :], mask=valid[:, None] & inside, other=0.0)
            tl.store(dst_ptr + pos[:, None] * K + cols[None, :], v, mask=inside)


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


def _unspecialised(fn: Any, sizes: list[str]) -> Any:
    return triton.jit(fn.fn, do_not_specialize=sizes, do_not_specialize_on_alignment=sizes)


#: The runner kernels again, never specialised on the sizes that change with the token count: an operator serving any
#: token count (``ovl emit moe-rs --any-rows``, whose emitted runner module imports these) passes new ones at every
#: count, which must not compile a new variant (Triton specialises an int argument that is 1 or a multiple of 16), and
#: the per-count operators' launches of the kernels above must not fix their variant first.
moe_permute_rows_rows = _unspecialised(moe_permute_rows, ["SLOTS"])
moe_slab_expect_rows = _unspecialised(moe_slab_expect, ["SLOTS", "SLAB_T"])
moe_topk_sum_rows = _unspecialised(moe_topk_sum, ["T"])
moe_topk_reduce_rs_rows = _unspecialised(moe_topk_reduce_rs, ["SLAB_T"])
