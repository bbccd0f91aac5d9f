"""How a call of the torch API reaches its implementation: straight, or through torch's dispatcher.

``torch.ops.ovl.*`` are what ``torch.compile`` traces, autograd records and fake tensors run through; a plain
eager call needs none of that, and the dispatcher's Python layers (the custom op's autograd wrapper, argument
checking) cost the host more than the launch itself once an operator replays its own graph. So a call whose
tensors are plain CUDA tensors that need no gradient, outside tracing, dispatch modes and the profiler, runs the
implementation directly; any other goes through the op. Both compute the same thing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .tensors import PLAIN

R = TypeVar("R")


def direct(tensors: tuple[torch.Tensor, ...]) -> bool:
    """Whether a call on ``tensors`` may skip the dispatcher (see the module docstring)."""
    if torch.compiler.is_compiling() or _get_current_dispatch_mode() is not None or torch.autograd.profiler._is_profiler_enabled:
        return False
    grad = torch.is_grad_enabled()
    return all(type(t) in PLAIN and t.is_cuda and not (grad and t.requires_grad) for t in tensors)


def call(op: Callable[..., R], impl: Callable[..., R], *args: Any) -> R:
    """``impl(*args)`` where the call may skip the dispatcher, else ``op(*args)`` (the ``torch.ops.ovl`` op)."""
    tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
    return impl(*args) if direct(tensors) else op(*args)
