"""Sequence-parallel attention as a Python function: ``sequence_parallel_attention(q, kv, group, causal=...)``
(``q`` ``[s, H, D]`` this rank's query positions, ``kv`` ``[s, 2, Hkv, D]`` their keys and values → ``[s, H, D]``)."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.dispatch import call
from ...errors import UsageError
from ...groups import resolve_group
from . import autograd as _autograd  # noqa: F401 - the op and its backward, registered
from .op import _attention_impl


def sequence_parallel_attention(q: torch.Tensor, kv: torch.Tensor, group: Any, *, causal: bool = False) -> torch.Tensor:
    """Attention of this rank's queries ``q`` ``[s, H, D]`` over every rank's keys and values
    (``kv`` ``[s, 2, Hkv, D]``, gathered behind the attention); returns ``[s, H, D]``. Scale
    ``1/√D``; ``causal`` masks keys after each query's global position. See the module docstring."""
    if not isinstance(causal, bool):
        raise UsageError(f"sequence_parallel_attention: causal must be True or False, not {causal!r}")
    return call(torch.ops.ovl.sequence_parallel_attention, _attention_impl, q, kv, resolve_group(group).name, causal)
