"""How a run fills a manifest's buffers before a checked launch: the reference output poisoned, a ``routing``
buffer's routing drawn once for every rank, and the seeds of the routings and ``replicated`` buffers the GPU modes
draw per checked launch."""

from __future__ import annotations

import numpy as np

from ..operators.ag_moe.routing import draw_routing
from .types import BufferSpec, Manifest


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


def checked_init(m: Manifest, buffer: str, init: str) -> str:
    """How a buffer is filled before a checked launch: the reference output is poisoned
    (an element no kernel writes fails the check), unless the operator works in place
    (the output is also an input)."""
    ref = m.reference
    if buffer == ref.output and buffer not in ref.inputs.values():
        return "poison"
    return init
