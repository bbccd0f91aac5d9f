"""The caller's tensors as the torch API's operators take them: checked (dtype, device, layout, alignment,
shapes), cut into per-rank views (a one-GPU group's tensors carry the rank first), outputs allocated, rows padded."""

from __future__ import annotations

import torch

from ..errors import UsageError
from ..groups import Group, resolve_group

#: Tensor types a checked signature's fast path accepts (a model's weights are parameters).
PLAIN = (torch.Tensor, torch.nn.Parameter)

DTYPES = {torch.bfloat16: "bf16"}

#: ReduceScatter slabs are padded to whole blocks of this many rows.
RS_ROW_BLOCK = 128


# ---- checks ----
def rank_views(t: torch.Tensor, g: Group, what: str, dims: int) -> list[torch.Tensor]:
    """The per-rank views of ``t``: ``[world, ...]`` rows for a one-GPU group, ``t`` itself otherwise."""
    if not isinstance(t, torch.Tensor):
        raise UsageError(f"{what} must be a torch.Tensor, not {type(t).__name__}")
    want = dims + (1 if g.stacked else 0)
    if t.dim() != want:
        lead = f"[{g.world}, ...] (the rank first, for a one-GPU group)" if g.stacked else "this rank's tensor"
        raise UsageError(f"{what} must have {want} dimensions, {lead}; got shape {tuple(t.shape)}")
    if g.stacked and t.shape[0] != g.world:
        raise UsageError(f"{what} must carry {g.world} ranks along dimension 0; got shape {tuple(t.shape)}")
    if t.dtype not in DTYPES:
        raise UsageError(f"{what} is {t.dtype}; the compiled operators take {', '.join(str(d) for d in DTYPES)}")
    if not t.is_cuda:
        raise UsageError(f"{what} is on {t.device}; the operators run on CUDA tensors")
    if not t.is_contiguous():
        raise UsageError(f"{what} must be contiguous (row-major); call .contiguous() first")
    views = list(t.unbind(0)) if g.stacked else [t]
    for r, v in enumerate(views):
        if v.data_ptr() % 16:
            raise UsageError(f"{what} (rank {r}) starts at an address that is not 16-byte aligned, which the kernels' TMA loads need")
    return views


def fast_layout(tensors: tuple[torch.Tensor, ...]) -> bool:
    """Whether tensors of an already checked signature are still fit to launch on: plain CUDA tensors,
    contiguous, 16-byte aligned (the per-rank views of a contiguous stacked tensor are aligned when it is and
    its per-rank size is, which the signature's shapes fixed)."""
    for t in tensors:
        if type(t) not in PLAIN or not t.is_contiguous() or t.data_ptr() % 16:
            return False
    return True


def local_shape(t: torch.Tensor, g: Group, what: str, dims: int) -> tuple[int, ...]:
    """The shape of one rank's ``t`` (dimensions and rank count checked, nothing else yet)."""
    if not isinstance(t, torch.Tensor):
        raise UsageError(f"{what} must be a torch.Tensor, not {type(t).__name__}")
    want = dims + (1 if g.stacked else 0)
    if t.dim() != want:
        lead = f"[{g.world}, ...] (the rank first, for a one-GPU group)" if g.stacked else "this rank's tensor"
        raise UsageError(f"{what} must have {want} dimensions, {lead}; got shape {tuple(t.shape)}")
    if g.stacked and t.shape[0] != g.world:
        raise UsageError(f"{what} must carry {g.world} ranks along dimension 0; got shape {tuple(t.shape)}")
    return tuple(t.shape[1:] if g.stacked else t.shape)


def gemm_operands(x: torch.Tensor, w: torch.Tensor, g: Group, what: str) -> tuple[list[torch.Tensor], list[torch.Tensor], int, int, int]:
    """Each rank's ``x`` ``[rows, k]`` and ``w`` ``[k, n]``, checked, with ``rows, k, n``."""
    xs, ws = rank_views(x, g, "x", 2), rank_views(w, g, "w", 2)
    rows, k = xs[0].shape
    k2, n = ws[0].shape
    if k != k2:
        raise UsageError(f"{what}: x is [{rows}, {k}] but w is [{k2}, {n}]; their inner dimensions differ")
    if w.dtype != x.dtype:
        raise UsageError(f"{what}: x is {x.dtype} but w is {w.dtype}")
    return xs, ws, rows, k, n


def empty_rows(g: Group, rows: int, cols: int, like: torch.Tensor) -> torch.Tensor:
    shape = (g.world, rows, cols) if g.stacked else (rows, cols)
    return torch.empty(shape, dtype=like.dtype, device=like.device)


def pad_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """``x`` with zero rows appended (along its second-to-last dimension) up to ``rows``."""
    if x.shape[-2] == rows:
        return x
    xp = torch.zeros((*x.shape[:-2], rows, x.shape[-1]), dtype=x.dtype, device=x.device)
    xp[..., : x.shape[-2], :].copy_(x)
    return xp


def fake_rows(x: torch.Tensor, group_name: str) -> tuple[Group, int]:
    g = resolve_group(group_name)
    return g, x.shape[-2]
