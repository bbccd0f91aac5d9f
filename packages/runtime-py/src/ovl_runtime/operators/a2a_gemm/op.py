"""AllToAll+GEMM's torch.library ops: ``ovl::all_to_all_matmul`` and ``ovl::all_to_all_matmul_exchanged`` (which
also returns ``AllToAll(x)`` copied from the kernel's buffer, for the weight gradient), with their fakes. By default one
operator serves every row count of its range (``call_key``: M, every rank's rows, a run-time argument; below the
compiler's crossover or outside the range it runs the group's all-to-all then the matmul); ``OVL_ANY_ROWS=0``
compiles one per row count."""

from __future__ import annotations

import torch

from ..._kernels.library import call_key
from ..._torch_api.registry import Bound, bound_operator, checked_call, run_moving
from ..._torch_api.tensors import DTYPES, gemm_operands, local_shape
from ...errors import UsageError
from ...groups import resolve_group


def _all_to_all_matmul(x: torch.Tensor, w: torch.Tensor, group_name: str, keep: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The output, and with ``keep`` a copy of the exchanged ``AllToAll(x)`` the launch left in its buffer
    (row slab q: what rank q sent)."""
    g = resolve_group(group_name)
    what = "all_to_all_matmul"

    def build() -> tuple[Bound, tuple[int, int, int]]:
        rows = local_shape(x, g, "x", 2)[0]
        if rows % g.world:
            raise UsageError(f"{what}: x's {rows} rows do not split into {g.world} equal slabs, one per rank")
        _xs, _ws, rows, k, n = gemm_operands(x, w, g, what)
        # The operator for every row count where M is in its range (``call_key``), else the one of this M.
        key = call_key("a2a-gemm", g.world, rows, n, k, DTYPES[x.dtype])
        return bound_operator(key, g, what), (rows, n, k)

    op, shape = checked_call(("a2a-gemm", g.name, x.shape, w.shape, x.dtype, x.device), (x, w), build)
    return run_moving(op, g, x, w, shape, keep)


def _all_to_all_matmul_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_to_all_matmul(x, w, group_name, keep=False)[0]


def _all_to_all_matmul_exchanged_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    out, exchanged = _all_to_all_matmul(x, w, group_name, keep=True)
    assert exchanged is not None
    return out, exchanged


@torch.library.custom_op("ovl::all_to_all_matmul", mutates_args=())
def _a2a_mm_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_to_all_matmul_impl(x, w, group_name)


@_a2a_mm_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], w.shape[-1]))


@torch.library.custom_op("ovl::all_to_all_matmul_exchanged", mutates_args=())
def _a2a_mm_exchanged_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _all_to_all_matmul_exchanged_impl(x, w, group_name)


@_a2a_mm_exchanged_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty((*x.shape[:-1], w.shape[-1])), torch.empty_like(x)
