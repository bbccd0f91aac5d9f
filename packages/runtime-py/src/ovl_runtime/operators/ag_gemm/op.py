"""AllGather+GEMM's torch.library ops: ``ovl::all_gather_matmul`` and ``ovl::all_gather_matmul_gathered`` (which
also returns ``cat(x over ranks)`` copied from the kernel's buffer, for the weight gradient), with their fakes."""

from __future__ import annotations

import torch

from ..._kernels.library import call_key
from ..._torch_api.registry import Bound, bound_operator, checked_call, run_moving
from ..._torch_api.tensors import DTYPES, fake_rows, gemm_operands
from ...groups import resolve_group


# ---- the operators ----
def _all_gather_matmul(x: torch.Tensor, w: torch.Tensor, group_name: str, keep: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The output, and with ``keep`` a copy of the gathered ``cat(x over ranks)`` the launch left in its buffer."""
    g = resolve_group(group_name)

    def build() -> tuple[Bound, tuple[int, int, int]]:
        _xs, _ws, m, k, n = gemm_operands(x, w, g, "all_gather_matmul")
        M = g.world * m
        # One operator for every row count where it serves M (no compile for a new M), else one for this M.
        return bound_operator(call_key("ag-gemm", g.world, M, n, k, DTYPES[x.dtype]), g, "all_gather_matmul"), (M, n, k)

    op, shape = checked_call(("ag-gemm", g.name, x.shape, w.shape, x.dtype, x.device), (x, w), build)
    return run_moving(op, g, x, w, shape, keep)


def _all_gather_matmul_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_gather_matmul(x, w, group_name, keep=False)[0]


def _all_gather_matmul_gathered_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    out, gathered = _all_gather_matmul(x, w, group_name, keep=True)
    assert gathered is not None
    return out, gathered


@torch.library.custom_op("ovl::all_gather_matmul", mutates_args=())
def _ag_mm_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_gather_matmul_impl(x, w, group_name)


@_ag_mm_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g, m = fake_rows(x, group_name)
    return x.new_empty((*x.shape[:-2], g.world * m, w.shape[-1]))


@torch.library.custom_op("ovl::all_gather_matmul_gathered", mutates_args=())
def _ag_mm_gathered_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _all_gather_matmul_gathered_impl(x, w, group_name)


@_ag_mm_gathered_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    g, m = fake_rows(x, group_name)
    return x.new_empty((*x.shape[:-2], g.world * m, w.shape[-1])), x.new_empty((*x.shape[:-2], g.world * m, x.shape[-1]))
