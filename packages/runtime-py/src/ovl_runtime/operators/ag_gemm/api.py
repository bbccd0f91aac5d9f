"""AllGather+GEMM as Python functions: ``all_gather_matmul`` (``x`` this rank's ``[m, K]`` rows, ``w`` its
``[K, n]`` weight → ``cat(x over ranks) @ w``; fp8 operands with ``scale_a`` / ``scale_b``) and
``fused_all_gather_matmul`` (PyTorch's argument list)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..._torch_api.dispatch import call
from ..._torch_api.fp8 import fp8_operands, is_fp8_call
from ...errors import UsageError
from ...groups import DistGroup, resolve_group
from . import autograd as _autograd  # noqa: F401 - the ops and their backward, registered
from .op import _all_gather_matmul_impl
from .scaled import _all_gather_scaled_matmul_impl


def all_gather_matmul(
    x: torch.Tensor, w: torch.Tensor, group: Any, *, scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None
) -> torch.Tensor:
    """``cat(x over the group's ranks, dim=0) @ w``; the gather overlaps the GEMM. See the module docstring.

    fp8 (inference): ``x`` and ``w`` in ``torch.float8_e4m3fn`` with ``scale_a`` and ``scale_b`` float32 tensors of
    one element give ``(cat(x) @ w) * scale_a * scale_b`` in bf16, as ``torch._scaled_mm`` (fp32 accumulation):
    ``w`` column-major as ``torch._scaled_mm`` takes it, one ``scale_a`` for the whole gathered ``x`` (every rank
    passes the same value), read at every call. Checked before any launch; no gradient.

    Where autograd records a gradient for ``w`` (grad enabled, ``w`` requiring grad) it runs
    ``torch.ops.ovl.all_gather_matmul_gathered``, which also returns the gathered ``x`` the kernel already
    holds (a local copy): the backward's ``AG(x)ᵀ @ dy`` reads it instead of gathering ``x`` again, as
    torch's layer keeps the gathered input of its GEMM (memory: ``[world·m, K]`` kept until the backward,
    where the plain op's backward keeps ``x`` and gathers it again)."""
    name = resolve_group(group).name
    if is_fp8_call(x, w, scale_a, scale_b):
        g = resolve_group(group)
        fp8_operands(x, w, scale_a, scale_b, g, "all_gather_matmul")  # refused here, before any launch or dispatch
        assert isinstance(scale_a, torch.Tensor) and isinstance(scale_b, torch.Tensor)
        return call(torch.ops.ovl.all_gather_scaled_matmul, _all_gather_scaled_matmul_impl, x, w, scale_a, scale_b, name)
    if torch.is_grad_enabled() and w.requires_grad:
        return torch.ops.ovl.all_gather_matmul_gathered(x, w, name)[0]
    return call(torch.ops.ovl.all_gather_matmul, _all_gather_matmul_impl, x, w, name)


def fused_all_gather_matmul(
    A_shard: torch.Tensor, Bs: Sequence[torch.Tensor], gather_dim: int, group_name: str, *, return_A: bool = True
) -> tuple[torch.Tensor | None, list[torch.Tensor]]:
    """``torch.ops.symm_mem.fused_all_gather_matmul``'s arguments and results (``gather_dim`` 0:
    the rows of each rank's tensor, also for a one-GPU group's stacked tensors).

    Each ``B`` is its own overlapped launch. ``A`` (the gathered input), when asked for, is
    gathered with ``torch.distributed`` (or stacked, for a one-GPU group) beside them."""
    g = resolve_group(group_name)
    if gather_dim != 0:
        raise UsageError(f"fused_all_gather_matmul gathers along rows (gather_dim 0), not {gather_dim}")
    outs = [all_gather_matmul(A_shard, b, g) for b in Bs]
    if not return_A:
        return None, outs
    if g.stacked:
        full = A_shard.reshape(-1, A_shard.shape[-1])
        return full.unsqueeze(0).expand(g.world, *full.shape).contiguous(), outs
    import torch.distributed as dist

    assert isinstance(g, DistGroup)  # a group that is not stacked is a process group
    full = A_shard.new_empty((g.world * A_shard.shape[0], A_shard.shape[1]))
    dist.all_gather_into_tensor(full, A_shard.contiguous(), group=g.pg)
    return full, outs
