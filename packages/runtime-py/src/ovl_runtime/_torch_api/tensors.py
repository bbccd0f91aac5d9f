"""The caller's tensors as the torch API's operators take them: checked (dtype, device, layout, alignment,
shapes), cut into per-rank views (a one-GPU group's tensors carry the rank first), outputs allocated, rows padded."""

from __future__ import annotations

import torch

from ..errors import UsageError
from ..groups import EmulatedGroup, Group, resolve_group

#: Tensor types a checked signature's fast path accepts (a model's weights are parameters).
PLAIN = (torch.Tensor, torch.nn.Parameter)

#: The element types the compiled operators take on a GPU, by torch dtype: the names the compiler takes (``ovl emit
#: --dtype``), which the kernel library keys carry (``LIBRARY_DTYPES``). Every floating tensor of one call has the same one.
GPU_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
#: An :class:`~ovl_runtime.groups.EmulatedGroup` also takes float32, running the bf16 kernels' manifest through the CPU
#: emulation, which computes in float32 whatever the kernels' type.
EMULATED_DTYPES = {**GPU_DTYPES, torch.float32: "bf16"}
#: The kernels' element type of every tensor dtype some group takes (the key of a call's compiled operator).
DTYPES = EMULATED_DTYPES

#: fp8 e4m3 (OCP, ``float8_e4m3fn``): taken by AllGather+GEMM alone, with per-tensor scales (:mod:`.fp8`).
FP8 = torch.float8_e4m3fn

#: ReduceScatter slabs are padded to whole blocks of this many rows.
RS_ROW_BLOCK = 128


# ---- checks ----
def accepted_dtypes(g: Group) -> dict[torch.dtype, str]:
    """The tensor dtypes ``g``'s operators take, with their kernels' element type: bf16 and fp16, and float32 too on
    an emulated group."""
    return EMULATED_DTYPES if isinstance(g, EmulatedGroup) else GPU_DTYPES


def supported_dtypes(g: Group) -> str:
    """The element types ``g``'s operators take, for messages: ``torch.bfloat16 (bf16) or torch.float16 (fp16)``."""
    return " or ".join(f"{d} ({n})" for d, n in accepted_dtypes(g).items())


def call_dtype(what: str, g: Group, **tensors: object) -> None:
    """Check the element types of a call on ``g`` whose floating operands are ``tensors`` (by argument name): each one
    ``g``'s operators take (:func:`accepted_dtypes`), all the same (:func:`same_dtype`). Checked after each tensor's
    dimensions (which the callers check first) and before devices, layouts or a kernel are looked at, so a mixed or
    unsupported call is refused before any launch; arguments that are not tensors are left to the dimension checks."""
    accepted = accepted_dtypes(g)
    for name, t in tensors.items():
        if isinstance(t, torch.Tensor) and t.dtype not in accepted:
            fp8 = " (fp8 e4m3 operands, with per-tensor scales, are taken by all_gather_matmul only)" if t.dtype == FP8 else ""
            raise UsageError(
                f"{what}: {name} is {t.dtype}; the operator takes {supported_dtypes(g)}{fp8}: "
                f"convert it with {name}.to(torch.bfloat16) or {name}.to(torch.float16)"
            )
    same_dtype(what, **tensors)


def same_dtype(what: str, **tensors: object) -> None:
    """Refuse a call whose tensors (by argument name, the first setting the type) do not share one element type."""
    first: tuple[str, torch.dtype] | None = None
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            continue
        if first is None:
            first = (name, t.dtype)
        elif t.dtype != first[1]:
            raise UsageError(
                f"{what}: {first[0]} is {first[1]} but {name} is {t.dtype}; one call's tensors share one element type "
                f"({' or '.join(GPU_DTYPES.values())}): convert {name} with {name}.to({first[1]})"
            )


def rank_views(t: torch.Tensor, g: Group, what: str, dims: int) -> list[torch.Tensor]:
    """The per-rank views of ``t``: ``[world, ...]`` rows for a one-GPU group, ``t`` itself otherwise."""
    local_shape(t, g, what, dims)
    if t.dtype not in accepted_dtypes(g):
        raise UsageError(f"{what} is {t.dtype}; the compiled operators take {supported_dtypes(g)}")
    check_device(t, g, what)
    if not t.is_contiguous():
        raise UsageError(f"{what} must be contiguous (row-major); call .contiguous() first")
    views = list(t.unbind(0)) if g.stacked else [t]
    for r, v in enumerate(views):
        if v.data_ptr() % 16:
            raise UsageError(f"{what} (rank {r}) starts at an address that is not 16-byte aligned, which the kernels' TMA loads need")
    return views


def check_device(t: torch.Tensor, g: Group, what: str) -> None:
    """``t`` is where ``g`` runs: on the CPU for an emulated group, on a CUDA device for the others."""
    if isinstance(g, EmulatedGroup):
        if t.device.type != "cpu":
            raise UsageError(f"{what} is on {t.device}; an emulated group runs on CPU tensors")
    elif not t.is_cuda:
        raise UsageError(f"{what} is on {t.device}; the operators run on CUDA tensors")


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
    """Each rank's ``x`` ``[rows, k]`` and ``w`` ``[k, n]``, checked (their dimensions, then their element types, then
    the rest), with ``rows, k, n``."""
    local_shape(x, g, "x", 2), local_shape(w, g, "w", 2)
    call_dtype(what, g, x=x, w=w)
    xs, ws = rank_views(x, g, "x", 2), rank_views(w, g, "w", 2)
    rows, k = xs[0].shape
    k2, n = ws[0].shape
    if k != k2:
        raise UsageError(f"{what}: x is [{rows}, {k}] but w is [{k2}, {n}]; their inner dimensions differ")
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
