"""The operators the torch API bound so far, one per (kernel directory, group): built by a shape's first call
(kernels found or compiled, loaded, buffers allocated), reused by every later call; their waits checked, their
buffers freed."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from .._runner.onegpu import MAX_CONNECTIONS

# Every stream of the one-GPU mode needs a hardware queue of its own; read when CUDA starts.
if not torch.cuda.is_initialized():
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", str(MAX_CONNECTIONS))

from .._kernels.library import KernelKey, manifest_for
from .._runner.agreement import same_everywhere
from .._runner.bound import BoundOperator
from .._runner.emulated import EmulatedOperator
from .._runner.rows import RowsOperator
from .._tune.tuner import tuned_key
from ..errors import UsageError
from ..groups import EmulatedGroup, Group, resolve_group
from .tensors import empty_rows, fast_layout

#: A bound operator: one compiled for one row count, or one serving every row count of a range.
Bound = BoundOperator | RowsOperator

_operators: dict[tuple[str, str], Bound] = {}


def bound_operator(key: KernelKey, g: Group, what: str) -> Bound:
    op = _operators.get((key.dirname, g.name))
    if op is None or op.closed:
        if isinstance(g, EmulatedGroup):  # the manifest through the CPU emulation: one process, no CUDA
            op = RowsOperator(manifest_for(key), g) if key.rows else EmulatedOperator(manifest_for(key), g)
            _operators[(key.dirname, g.name)] = op
            return op
        if torch.cuda.is_current_stream_capturing():
            raise UsageError(
                f"{what}: the first call of a shape compiles and loads its kernels and allocates its buffers, which a "
                "CUDA graph capture cannot do: call the operator once before capturing"
            )
        same_everywhere(g, (key.op, key.m, key.n, key.k, key.dtype, key.experts, key.topk, key.heads, key.causal), what)
        # With on-device tuning on (OVL_TUNE=1, ops.tune()), the configuration measured fastest here; else `key`.
        # A TLX key (prepared cubins the tuned table measured faster, ``_kernels.tlx``) is bound as found: the tuner's
        # candidates are Triton configurations.
        chosen = key if key.tlx else tuned_key(key, g)
        op = RowsOperator(manifest_for(chosen), g) if chosen.rows else BoundOperator(manifest_for(chosen), g)
        _operators[(key.dirname, g.name)] = op
    return op


#: The buffer an AllGather+GEMM's or AllToAll+GEMM's GEMM reads its moved rows from, as the compiler names it:
#: after a launch it holds ``AG(x)`` or ``A2A(x)``, which the weight gradient reuses.
OPERAND_BUFFER = "A"


def run_moving(
    op: Bound, g: Group, x: torch.Tensor, w: torch.Tensor, shape: tuple[int, int, int], keep: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One launch of an operator that moves ``x`` before its GEMM (AllGather, AllToAll) on ``x`` and ``w``
    (``shape``: rows, n, k): its ``[rows, n]`` output and, with ``keep``, a copy of its ``[rows, k]`` operand
    buffer, the moved ``x``."""
    rows, n, k = shape
    out = empty_rows(g, rows, n, x)
    op.run({"A": x, "B": w}, out)
    if not keep:
        return out, None
    moved = empty_rows(g, rows, k, x)
    op.copy_buffer(OPERAND_BUFFER, moved)
    return out, moved


#: Checked calls by signature (operator, group, shapes, dtype, device; and every tensor's element type): a repeated
#: call skips the shape checks and the kernel key (see :func:`checked_call`).
_calls: dict[tuple[Any, ...], tuple[Bound, Any]] = {}


def checked_call(
    signature: tuple[Any, ...], tensors: tuple[torch.Tensor, ...], build: Callable[[], tuple[Bound, Any]]
) -> tuple[Bound, Any]:
    """The bound operator (and what ``build`` derived with it) of a call whose ``signature`` was seen before, or
    ``build()``'s: the full checks, the key, the operator bound. A seen signature fixes everything but the tensors'
    layout and addresses, which are checked here on every call (:func:`~ovl_runtime._torch_api.tensors.fast_layout`);
    a call that fails them goes through ``build`` again, whose checks name the problem. Every tensor's element type is
    part of the signature: a call whose ``w`` alone changed dtype is checked (and refused) anew, never launched on a
    kernel compiled for another."""
    signature = (signature, tuple(t.dtype for t in tensors))
    hit = _calls.get(signature)
    if hit is not None and not hit[0].closed and fast_layout(tensors):
        return hit
    hit = build()
    _calls[signature] = hit
    return hit


def operators() -> list[Bound]:
    """Every operator bound so far in this process (for inspection and tests)."""
    return [op for op in _operators.values() if not op.closed]


def synchronize(group: Any = None) -> None:
    """Wait for every call so far (of ``group``, or of every group) and raise the first wait that gave up."""
    name = None if group is None else resolve_group(group).name
    for (_key, gname), op in list(_operators.items()):
        if not op.closed and (name is None or gname == name):
            op.check()


def close_all(force: bool = False) -> None:
    """Free every bound operator (refused for one a CUDA graph captured, unless ``force``)."""
    for key, op in list(_operators.items()):
        op.close(force=force)
        del _operators[key]
    _calls.clear()


def bound_items(prefix: str) -> list[Bound]:
    """The open operators whose kernel directory starts with ``prefix`` (an operator's name: ``moe-rs``)."""
    return [op for (dirname, _group), op in list(_operators.items()) if dirname.startswith(prefix) and not op.closed]
