"""MoE routing computed on the device: the routing tables' sizes, their numpy reference, and the routing a
checked run draws. Numpy only (no triton import): the kernels that build the tables on the device are in
``routing_kernels``. ``topk_ids [T, k]`` (int32) lists each token's k experts; the tables group the token slots
``t·k + j`` by expert."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AlignSizes:
    """The sizes of the routing tables of ``tokens × topk`` slots over ``experts`` experts."""

    tokens: int
    topk: int
    experts: int
    block_m: int

    @property
    def slots(self) -> int:
        """``T·k``: the token slots, and the sentinel of padding entries."""
        return self.tokens * self.topk

    @property
    def max_blocks(self) -> int:
        """Blocks of the worst routing: every expert's group ends with ``BLOCK_M - 1`` padding entries."""
        return max(1, -(-(self.slots + self.experts * (self.block_m - 1)) // self.block_m))

    @property
    def padded(self) -> int:
        """Length of ``sorted_token_ids``."""
        return self.max_blocks * self.block_m

    @property
    def experts_p2(self) -> int:
        """Experts rounded up to a power of two (at least 2): the kernels' vector width."""
        return max(2, 1 << (self.experts - 1).bit_length())


def check_sizes(tokens: int, topk: int, experts: int, block_m: int) -> AlignSizes:
    """The sizes, after checking them. @raises ValueError naming the bad one."""
    for name, v in (("tokens", tokens), ("top-k", topk), ("experts", experts), ("BLOCK_M", block_m)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"MoE routing: {name} must be a positive integer, got {v!r}")
    if topk > experts:
        raise ValueError(f"MoE routing: top-k ({topk}) exceeds the number of experts ({experts}); a token picks distinct experts")
    if block_m & (block_m - 1):
        raise ValueError(f"MoE routing: BLOCK_M ({block_m}) must be a power of two")
    return AlignSizes(tokens, topk, experts, block_m)


def moe_align_reference(topk_ids: np.ndarray, num_experts: int, block_m: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The routing tables in numpy: ``(sorted_token_ids, expert_of_block, num_valid_blocks)``
    with the kernels' sizes and sentinels (ids outside ``[0, E)`` dropped)."""
    ids2 = np.asarray(topk_ids)
    ids = ids2.reshape(-1)
    sizes = check_sizes(int(ids2.shape[0]), int(ids2.shape[1]), num_experts, block_m)
    sorted_ids = np.full(sizes.padded, sizes.slots, dtype=np.int32)
    expert_of_block = np.full(sizes.max_blocks, -1, dtype=np.int32)
    pos = 0
    for e in range(num_experts):
        slots = np.nonzero(ids == e)[0]
        if slots.size == 0:
            continue
        sorted_ids[pos : pos + slots.size] = slots
        blocks = -(-slots.size // block_m)
        expert_of_block[pos // block_m : pos // block_m + blocks] = e
        pos += blocks * block_m
    return sorted_ids, expert_of_block, pos // block_m


def draw_routing(rng: np.random.Generator, tokens: int, topk: int, experts: int, choices: Sequence[int] | None = None) -> np.ndarray:
    """A routing ``[tokens, topk]`` int32: each token's ``topk`` distinct experts drawn uniformly
    from ``choices`` (default every expert; a subset leaves the others without tokens)."""
    pool = np.arange(experts) if choices is None else np.asarray(list(choices), dtype=np.int64)
    if pool.size < topk:
        raise ValueError(f"MoE routing: {topk} distinct experts per token cannot be drawn from {pool.size} choices")
    picks = np.argsort(rng.random((tokens, pool.size)), axis=1)[:, :topk]
    return pool[picks].astype(np.int32)


def slab_cover_reference(sorted_ids: np.ndarray, num_blocks: int, block_m: int, topk: int, slab_t: int, slabs: int) -> np.ndarray:
    """``cover[s]``: the valid blocks whose token range ``[first, last]`` holds slab s (what ``moe_slab_expect``
    counts); ``sorted_ids`` pads with the sentinel ``T·k = slabs · slab_t · topk``."""
    cover = np.zeros(slabs, dtype=np.int64)
    for b in range(num_blocks):
        entries = sorted_ids[b * block_m : (b + 1) * block_m]
        tokens = entries[entries < slabs * slab_t * topk] // topk
        cover[tokens.min() // slab_t : tokens.max() // slab_t + 1] += 1
    return cover
