"""MoE with routing computed on the device (``ag-moe``): the routing tables' sizes, their numpy
reference, the routing a checked run draws, the operator's numpy reference and its manifest checks.

Numpy only (no triton import): the kernels that build the tables on the device are in
``moe_align`` and are imported only where they launch. ``topk_ids [T, k]`` (int32) lists each
token's k experts; the tables group the token slots ``t·k + j`` by expert (see ``moe_align``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ManifestError
from .manifest_types import BufferSpec, Manifest, RoutingInit

__all__ = [
    "AlignSizes",
    "RoutingInit",
    "check_moe",
    "check_routing_buffer",
    "check_sizes",
    "draw_buffer",
    "draw_routing",
    "random_fill",
    "replicated_seed",
    "moe_align_reference",
    "moe_matmul",
    "moe_rs_partial",
    "check_moe_rs_reference",
    "routing_seed",
    "slab_cover_reference",
]


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


def draw_buffer(b: BufferSpec, rng: np.random.Generator) -> np.ndarray:
    """A ``routing`` buffer's contents, drawn once for every rank (the routing of all tokens)."""
    assert b.routing is not None and len(b.shape) == 2
    return draw_routing(rng, b.shape[0], b.shape[1], b.routing.experts, b.routing.choices)


def routing_seed(draw: int) -> np.random.Generator:
    """The generator of a GPU rank's ``draw``-th routing: every rank draws the same routing
    (their tensor generators are seeded per rank), a fresh one per checked launch."""
    return np.random.default_rng([0x0E_0E, draw])


def replicated_seed(draw: int) -> np.random.Generator:
    """The generator of a GPU rank's ``draw``-th ``replicated`` buffer: the same on every rank, fresh per launch."""
    return np.random.default_rng([0x0E_0F, draw])


def random_fill(like: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Values for a ``replicated`` buffer shaped and typed as ``like``, drawn as ``random`` draws them
    (standard normal for floats, integers in [0, 100) otherwise); the caller copies them to every rank."""
    if np.issubdtype(like.dtype, np.floating):
        return rng.standard_normal(like.shape, dtype=np.float32).astype(like.dtype)
    return rng.integers(0, 100, like.shape).astype(like.dtype)


def slab_cover_reference(sorted_ids: np.ndarray, num_blocks: int, block_m: int, topk: int, slab_t: int, slabs: int) -> np.ndarray:
    """``cover[s]``: the valid blocks whose token range ``[first, last]`` holds slab s (what ``moe_slab_expect``
    counts); ``sorted_ids`` pads with the sentinel ``T·k = slabs · slab_t · topk``."""
    cover = np.zeros(slabs, dtype=np.int64)
    for b in range(num_blocks):
        entries = sorted_ids[b * block_m : (b + 1) * block_m]
        tokens = entries[entries < slabs * slab_t * topk] // topk
        cover[tokens.min() // slab_t : tokens.max() // slab_t + 1] += 1
    return cover


def moe_matmul(x: np.ndarray, w: np.ndarray, topk_ids: np.ndarray) -> np.ndarray:
    """``C[t·k + j] = x[t] @ w[topk_ids[t, j]]`` (``w`` [E, K, N]), expert by expert."""
    T, k = topk_ids.shape
    c = np.zeros((T * k, w.shape[2]), dtype=np.result_type(x, w))
    flat = topk_ids.reshape(-1)
    for e in np.unique(flat):
        slots = np.nonzero(flat == e)[0]
        c[slots] = x[slots // k] @ w[int(e)]
    return c


def check_moe(m: Manifest) -> None:
    """An ag-moe reference: inputs A (the tokens [M, K]), B ([E, K, N]) and topk (a ``routing``
    buffer [M, k], k <= E, its experts those of B), output [M·k, N].

    @raises ManifestError at the field that is wrong.
    """
    ref = m.reference
    bufs = {b.name: b for b in m.buffers}
    for key in ("A", "B", "topk"):
        if key not in ref.inputs:
            raise ManifestError(f"reference.inputs.{key}", "ag-moe needs inputs A (tokens), B (experts' weights) and topk (the routing)")
    topk = bufs[ref.inputs["topk"]]
    if topk.dtype != "int32" or len(topk.shape) != 2 or topk.shape[0] != ref.M:
        raise ManifestError(
            "reference.inputs.topk", f"buffer {topk.name!r} must be int32 [M = {ref.M}, k], got {topk.dtype} {list(topk.shape)}"
        )
    k = topk.shape[1]
    experts, rest = divmod(bufs[ref.inputs["B"]].numel, ref.K * ref.N)
    if rest != 0 or experts < 1:
        raise ManifestError("reference.inputs.B", f"buffer {ref.inputs['B']!r} is not [E, K, N] with K x N = {ref.K * ref.N}")
    if topk.routing is not None and topk.routing.experts != experts:
        raise ManifestError(f"buffer {topk.name}.routing.experts", f"routes to {topk.routing.experts} experts, but B holds {experts}")
    if k > experts:
        raise ManifestError("reference.inputs.topk", f"top-k ({k}) exceeds the {experts} experts of B")
    out = bufs[ref.output]
    if out.numel != ref.M * k * ref.N:
        raise ManifestError("reference.output", f"buffer {out.name!r} must be [M·k, N] = [{ref.M * k}, {ref.N}], got {list(out.shape)}")


def moe_rs_partial(h: np.ndarray, w: np.ndarray, topk_ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """One rank's moe-rs contribution ``[T, N]``: ``Σ_j weights[t, j] · (h[t·k + j] @ w[topk_ids[t, j]])``
    (``h`` [T·k, K], ``w`` [E, K, N]), expert by expert."""
    T, k = topk_ids.shape
    flat = topk_ids.reshape(-1)
    y = np.zeros((T * k, w.shape[2]), dtype=np.result_type(h, w, np.float32))
    for e in np.unique(flat):
        slots = np.nonzero(flat == e)[0]
        y[slots] = h[slots] @ w[int(e)]
    return (y * weights.reshape(-1, 1)).reshape(T, k, -1).sum(axis=1)


def check_moe_rs_reference(m: Manifest) -> None:
    """A moe-rs reference: inputs A (``h`` [M·k, K]), B ([E, K, N]), topk (a ``routing`` buffer [M, k],
    k <= E, its experts those of B) and weights ([M, k], the same on every rank: ``replicated``), output
    each rank's rows [M/W, N].

    @raises ManifestError at the field that is wrong.
    """
    ref = m.reference
    bufs = {b.name: b for b in m.buffers}
    for key in ("A", "B", "topk", "weights"):
        if key not in ref.inputs:
            raise ManifestError(
                f"reference.inputs.{key}", "moe-rs needs inputs A (h), B (experts' weights), topk (the routing) and weights (topk weights)"
            )
    topk = bufs[ref.inputs["topk"]]
    if topk.dtype != "int32" or len(topk.shape) != 2 or topk.shape[0] != ref.M or topk.init != "routing":
        raise ManifestError(
            "reference.inputs.topk",
            f"buffer {topk.name!r} must be an int32 routing buffer [M = {ref.M}, k], got {topk.dtype} {list(topk.shape)} init {topk.init}",
        )
    k = topk.shape[1]
    wts = bufs[ref.inputs["weights"]]
    if list(wts.shape) != [ref.M, k] or wts.init not in ("replicated", "keep"):
        raise ManifestError(
            "reference.inputs.weights",
            f"buffer {wts.name!r} must be [M, k] = [{ref.M}, {k}], init replicated, got {list(wts.shape)} {wts.init}",
        )
    experts, rest = divmod(bufs[ref.inputs["B"]].numel, ref.K * ref.N)
    if rest != 0 or experts < 1:
        raise ManifestError("reference.inputs.B", f"buffer {ref.inputs['B']!r} is not [E, K, N] with K x N = {ref.K * ref.N}")
    if topk.routing is not None and topk.routing.experts != experts:
        raise ManifestError(f"buffer {topk.name}.routing.experts", f"routes to {topk.routing.experts} experts, but B holds {experts}")
    if bufs[ref.inputs["A"]].numel != ref.M * k * ref.K:
        raise ManifestError("reference.inputs.A", f"buffer {ref.inputs['A']!r} must be [M·k, K] = [{ref.M * k}, {ref.K}]")


def check_routing_buffer(b: BufferSpec, path: str) -> None:
    """``init: "routing"`` comes with ``routing`` (and only then): an int32 [tokens, k] buffer,
    k distinct experts per token drawable from its choices."""
    if (b.init == "routing") != (b.routing is not None):
        raise ManifestError(path, 'a buffer has init "routing" exactly when it states routing: { experts, choices? }')
    if b.routing is None:
        return
    if b.dtype != "int32" or len(b.shape) != 2:
        raise ManifestError(path, f"a routing buffer is int32 [tokens, k], got {b.dtype} {list(b.shape)}")
    pool = b.routing.choices if b.routing.choices is not None else tuple(range(b.routing.experts))
    if any(not 0 <= e < b.routing.experts for e in pool) or len(set(pool)) != len(pool):
        raise ManifestError(f"{path}.routing.choices", f"choices must be distinct experts in [0, {b.routing.experts}), got {list(pool)}")
    if b.shape[1] > len(pool):
        raise ManifestError(f"{path}.routing", f"each token needs {b.shape[1]} distinct experts but only {len(pool)} can be drawn")
