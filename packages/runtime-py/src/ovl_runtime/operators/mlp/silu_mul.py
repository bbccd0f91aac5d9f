"""SiLU-mul of a gate/up product and its derivative, each one pass over memory: ``h = silu(g) · u`` for
``[g | u] = gu`` ``[..., 2·I]``, and ``d[g | u]`` from ``dh``.

The MLP layer's training path keeps the gate/up product of its AllGather+GEMM for the backward
(``ops.all_gather_matmul_silu_mul`` where autograd records). Written in torch, SiLU-mul is two kernels forward and,
through the slices of ``gu``, seven backward — the slices' gradients zero-filled, copied in and summed — 3 ms of a
30 ms step at MLP-5 on two H100s. Here the forward reads ``gu`` once and writes ``h``; the backward reads ``gu``
and ``dh`` once and writes ``d[g | u]`` contiguous, in fp32 inside:

- ``dg = dh · u · σ(g) · (1 + g · (1 − σ(g)))`` (SiLU's derivative), ``du = dh · silu(g)``.

::

    from ovl_runtime.silu_mul import silu_mul

    h = silu_mul(gu)            # gu [..., 2·I] requiring grad: h [..., I]; h.backward(dh) runs silu_mul_backward

Both are ``torch.library`` ops built with ``triton_op`` (``torch.ops.ovl.silu_mul``, ``torch.ops.ovl.silu_mul_backward``;
the first with the second as its backward), so ``torch.compile`` traces them; CPU tensors (the tests without a
GPU) take torch's ops, ``aten.silu_backward`` for the gate's derivative as torch's autograd takes it.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

#: Columns of ``I`` each program handles.
BLOCK = 1024


@triton.jit
def _gate_up(gu_ptr, INTER, BLOCK_C: tl.constexpr):
    """This program's row, its columns, which of them are inside ``I``, and the gate and up values there (fp32)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    inside = cols < INTER
    src = gu_ptr + row * 2 * INTER + cols
    g = tl.load(src, mask=inside).to(tl.float32)
    u = tl.load(src + INTER, mask=inside).to(tl.float32)
    return row, cols, inside, g, u


@triton.jit
def silu_mul_rows(gu_ptr, h_ptr, INTER, BLOCK_C: tl.constexpr):
    """Program (r, j): columns ``[j·BLOCK_C, (j+1)·BLOCK_C)`` of row r: ``h[r] = silu(gu[r, :I]) · gu[r, I:]``."""
    row, cols, inside, g, u = _gate_up(gu_ptr, INTER, BLOCK_C)
    h = g * tl.sigmoid(g) * u
    tl.store(h_ptr + row * INTER + cols, h.to(h_ptr.dtype.element_ty), mask=inside)


@triton.jit
def silu_mul_backward_rows(gu_ptr, dh_ptr, dgu_ptr, INTER, BLOCK_C: tl.constexpr):
    """Program (r, j): ``d[g | u]`` of row r's columns ``[j·BLOCK_C, (j+1)·BLOCK_C)`` from ``dh[r]``."""
    row, cols, inside, g, u = _gate_up(gu_ptr, INTER, BLOCK_C)
    dh = tl.load(dh_ptr + row * INTER + cols, mask=inside).to(tl.float32)
    sig = tl.sigmoid(g)
    dg = dh * u * sig * (1.0 + g * (1.0 - sig))
    du = dh * g * sig
    dst = dgu_ptr + row * 2 * INTER + cols
    tl.store(dst, dg.to(dgu_ptr.dtype.element_ty), mask=inside)
    tl.store(dst + INTER, du.to(dgu_ptr.dtype.element_ty), mask=inside)


def _width(gu: torch.Tensor, what: str) -> int:
    if gu.dim() < 1 or gu.shape[-1] % 2:
        raise ValueError(f"{what}: the gate/up product {list(gu.shape)} must end in an even width [..., 2·I]")
    return gu.shape[-1] // 2


def row_grid(rows: int, inter: int, block: int) -> tuple[int, int]:
    """The kernels' grid: one program per row and ``block`` columns of ``I``."""
    return (rows, triton.cdiv(inter, block))


@torch.library.triton_op("ovl::silu_mul", mutates_args=())
def silu_mul(gu: torch.Tensor) -> torch.Tensor:
    """``silu(gu[..., :I]) · gu[..., I:]`` ``[..., I]`` for ``gu`` ``[..., 2·I]``."""
    inter = _width(gu, "silu_mul")
    if gu.device.type != "cuda":
        return torch.nn.functional.silu(gu[..., :inter]) * gu[..., inter:]
    src = gu.contiguous()
    h = src.new_empty((*src.shape[:-1], inter))
    rows = src.numel() // max(1, 2 * inter)
    if rows and inter:
        torch.library.wrap_triton(silu_mul_rows)[row_grid(rows, inter, BLOCK)](src, h, inter, BLOCK_C=BLOCK, num_warps=4)
    return h


@torch.library.triton_op("ovl::silu_mul_backward", mutates_args=())
def silu_mul_backward(gu: torch.Tensor, dh: torch.Tensor) -> torch.Tensor:
    """``d[g | u]`` ``[..., 2·I]`` of ``h = silu(g) · u`` for ``gu = [g | u]`` and the incoming gradient ``dh``."""
    inter = _width(gu, "silu_mul_backward")
    if tuple(dh.shape) != (*gu.shape[:-1], inter):
        raise ValueError(f"silu_mul_backward: dh is {list(dh.shape)}, the gate/up product {list(gu.shape)}")
    if gu.device.type != "cuda":
        # In the operands' dtype, as torch's autograd takes SiLU-mul's derivative (silu_backward is fp32 inside).
        gate, up = gu[..., :inter], gu[..., inter:]
        return torch.cat([torch.ops.aten.silu_backward(dh * up, gate), dh * torch.nn.functional.silu(gate)], dim=-1)
    src, grad = gu.contiguous(), dh.contiguous()
    dgu = src.new_empty(src.shape)
    rows = src.numel() // max(1, 2 * inter)
    if rows and inter:
        torch.library.wrap_triton(silu_mul_backward_rows)[row_grid(rows, inter, BLOCK)](src, grad, dgu, inter, BLOCK_C=BLOCK, num_warps=4)
    return dgu


def _save(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.save_for_backward(inputs[0])


def _backward(ctx: Any, dh: torch.Tensor) -> torch.Tensor:
    (gu,) = ctx.saved_tensors
    return torch.ops.ovl.silu_mul_backward(gu, dh)


silu_mul.register_autograd(_backward, setup_context=_save)
