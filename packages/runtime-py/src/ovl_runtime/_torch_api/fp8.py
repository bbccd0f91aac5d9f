"""fp8 operands of a torch API call (AllGather+GEMM's ``scale_a`` / ``scale_b`` form), checked before any launch:
``x`` and ``w`` both ``torch.float8_e4m3fn``, ``w`` column-major (as ``torch._scaled_mm`` takes its second operand,
so the kernel reads it K-major as Bt ``[N, K]``), two float32 one-element scales beside them, no gradient (fp8 is an
inference format). One ``scale_a`` serves the whole gathered ``x``: every rank passes the same value.

:func:`fp8_operands` returns what the compiled operator binds: Bt (a view of ``w``, no copy) and each scale as a
``[1]`` tensor per rank — the caller's own under torchrun, so the kernel reads its value at every launch; for a
one-GPU group a ``[world]`` copy made at the call (each rank's view an address of its own), so a changed scale is
seen by the next call either way."""

from __future__ import annotations

import torch

from ..errors import UsageError
from ..groups import EmulatedGroup, Group
from .tensors import FP8, check_device, local_shape

#: The kernels' element type of an fp8 call (the library key's dtype).
FP8_KEY = "fp8e4m3"


def is_fp8_call(x: object, w: object, scale_a: object, scale_b: object) -> bool:
    """Whether a call asks for the fp8 form: an fp8 operand, or a scale given."""
    return scale_a is not None or scale_b is not None or any(isinstance(t, torch.Tensor) and t.dtype == FP8 for t in (x, w))


def fp8_operands(
    x: torch.Tensor, w: torch.Tensor, scale_a: object, scale_b: object, g: Group, what: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int, int]:
    """Check an fp8 call (dimensions, element types, scales, gradients, layouts, devices, in that order; see the module
    docstring) and return ``(bt, scale_a, scale_b, rows, k, n)``: Bt ``[..., N, K]`` and the per-rank scales."""
    local_shape(x, g, "x", 2), local_shape(w, g, "w", 2)
    if not (isinstance(scale_a, torch.Tensor) and isinstance(scale_b, torch.Tensor)):
        raise UsageError(
            f"{what}: fp8 operands need both scale_a and scale_b, float32 tensors of one element each "
            "(C = (AllGather(x) @ w) * scale_a * scale_b, as torch._scaled_mm)"
        )
    for name, t in (("x", x), ("w", w)):
        if t.dtype != FP8:
            raise UsageError(
                f"{what}: scale_a and scale_b go with fp8 operands, and {name} is {t.dtype}: pass x and w as {FP8} "
                "(both), or leave the scales out for bf16 or fp16"
            )
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32 or s.numel() != 1:
            raise UsageError(f"{what}: {name} must be a float32 tensor of one element; got {s.dtype} of shape {tuple(s.shape)}")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, w, scale_a, scale_b)):
        raise UsageError(
            f"{what}: fp8 operands are an inference format, with no backward here: call it under torch.no_grad() "
            "or on tensors that do not require grad"
        )
    if not x.is_contiguous():
        raise UsageError(f"{what}: x must be contiguous (row-major); call .contiguous() first")
    bt = w.transpose(-1, -2)
    if not bt.is_contiguous():
        fix = "w.transpose(-1, -2).contiguous().transpose(-1, -2)"
        raise UsageError(f"{what}: an fp8 w must be column-major, as torch._scaled_mm takes it ({fix} makes it so)")
    for name, t in (("x", x), ("w", w), ("scale_a", scale_a), ("scale_b", scale_b)):
        check_device(t, g, name)
    xs = list(x.unbind(0)) if g.stacked else [x]
    bts = list(bt.unbind(0)) if g.stacked else [bt]
    for name, views in (("x", xs), ("w", bts)):
        for r, v in enumerate(views):
            if v.data_ptr() % 16:
                raise UsageError(
                    f"{what}: {name} (rank {r}) starts at an address that is not 16-byte aligned, which the kernels' TMA loads need"
                )
    rows, k = xs[0].shape
    n, k2 = bts[0].shape
    if k != k2:
        raise UsageError(f"{what}: x is [{rows}, {k}] but w is [{k2}, {n}]; their inner dimensions differ")
    return bt, per_rank_scale(scale_a, g), per_rank_scale(scale_b, g), rows, k, n


#: Floats per rank of a one-GPU group's scale copy: each rank's scale starts 16-byte aligned, as Triton specializes
#: pointer arguments (one compiled kernel for every rank).
SCALE_ROW = 4


def per_rank_scale(s: torch.Tensor, g: Group) -> torch.Tensor:
    """``s`` as the operator binds it: ``[1]`` (a view of the caller's tensor) for one rank; for a one-GPU group a
    ``[world, SCALE_ROW]`` copy of the current value (each rank's row at an address of its own; the kernel reads
    its first element), for an emulated one ``[world]``."""
    one = s.reshape(1)
    if not g.stacked:
        return one
    if isinstance(g, EmulatedGroup):
        return one.expand(g.world).contiguous()
    return one.reshape(1, 1).expand(g.world, SCALE_ROW).contiguous()


def scaled_matmul(a: torch.Tensor, bt: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, out: torch.Tensor) -> None:
    """``out = (a @ btᵀ) · scale_a · scale_b`` computed in float32 from the fp8 values (``torch._scaled_mm``'s
    semantics): the plain path without overlap. ``a`` is ``[rows, k]`` with ``[1]`` scales (one rank), or stacked
    ``[world, rows, k]`` with the scales of :func:`per_rank_scale` (each rank's first), broadcast over its rows."""
    out.copy_((a.float() @ bt.float().transpose(-1, -2)) * (_per_rank(scale_a, a) * _per_rank(scale_b, a)))


def _per_rank(s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    if a.dim() == 2:
        return s.reshape(-1)[0].float()
    return s.reshape(a.shape[0], -1)[:, 0].float().reshape(-1, 1, 1)
