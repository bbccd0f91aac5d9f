"""A weight with its last two dimensions swapped, as a new contiguous tensor: ``w.transpose(-1, -2).contiguous()``.

The GEMM operators' backward passes hand their dual operator ``wᵀ`` (AllGather+GEMM's input gradient is
``RS(dy @ wᵀ)``, GEMM+ReduceScatter's ``AG(dy) @ wᵀ``), and the compiled kernels read ``B`` row-major. torch's copy
of a transposed view walks the source with a stride of a whole row per element: 1.8 ms for a ``[8192, 14336]``
bf16 weight on an H100, the time of a third of that layer's GEMM. :func:`transposed` moves the weight in square
tiles instead (``transpose_tiles``: each program reads a ``BLOCK × BLOCK`` tile along rows and writes it
transposed along rows of the output, through registers): 0.50 ms for that weight and the ``[14336, 8192]`` one
together, where torch's copies took 2.75 ms.

::

    from ovl_runtime.transpose import transposed

    wt = transposed(w)          # == w.transpose(-1, -2).contiguous(), a new tensor; [W, K, N] → [W, N, K] too

It is a ``torch.library`` op (``torch.ops.ovl.transpose``) built with ``triton_op``, so ``torch.compile`` and
AOTAutograd trace it; CPU tensors (the tests without a GPU) take torch's copy.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

#: Edge of the square tiles (elements).
BLOCK = 64


@triton.jit
def transpose_tiles(src_ptr, dst_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Program (i, j, b): tile (i, j) of matrix b of ``src`` ``[B, R, C]`` into ``dst`` ``[B, C, R]``, transposed."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    base = tl.program_id(2).to(tl.int64) * R * C
    inside = (rows[:, None] < R) & (cols[None, :] < C)
    tile = tl.load(src_ptr + base + rows[:, None].to(tl.int64) * C + cols[None, :], mask=inside)
    out = dst_ptr + base + cols[:, None].to(tl.int64) * R + rows[None, :]
    tl.store(out, tl.trans(tile), mask=(cols[:, None] < C) & (rows[None, :] < R))


@torch.library.triton_op("ovl::transpose", mutates_args=())
def transposed(w: torch.Tensor) -> torch.Tensor:
    """``w.transpose(-1, -2).contiguous()`` (``w`` of two dimensions or more; the leading ones batch)."""
    if w.dim() < 2:
        raise ValueError(f"transposed: a tensor of {w.dim()} dimension(s) has no last two to swap")
    if w.device.type != "cuda":
        return w.transpose(-1, -2).clone(memory_format=torch.contiguous_format)
    src = w.contiguous()
    rows, cols = src.shape[-2], src.shape[-1]
    out = src.new_empty((*src.shape[:-2], cols, rows))
    if src.numel() == 0:
        return out
    grid = tile_grid(tuple(src.shape), BLOCK)
    torch.library.wrap_triton(transpose_tiles)[grid](src, out, rows, cols, BLOCK_R=BLOCK, BLOCK_C=BLOCK, num_warps=4)
    return out


def tile_grid(shape: tuple[int, ...], block: int) -> tuple[int, int, int]:
    """``transpose_tiles``'s grid for a source of ``shape`` (leading dimensions batch) and square tiles of ``block``."""
    return (triton.cdiv(shape[-2], block), triton.cdiv(shape[-1], block), math.prod(shape[:-2]))
