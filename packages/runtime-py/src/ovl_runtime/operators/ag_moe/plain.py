"""MoE part 1 without overlap, as a torch user runs it: every rank's tokens gathered by the group's all-gather, then
the grouped expert GEMM — the slots sorted by expert, their tokens gathered, ``torch._grouped_mm`` where it takes the
operands (CUDA, bf16; a matmul per expert elsewhere), the rows scattered back to slot order. What an operator serving
any token count runs where overlapping does not pay (``_runner.rows_plain.PLAIN``). Slots whose expert id lies outside
``[0, E)`` are left unwritten, as the overlapped kernels leave them. Imports torch.
"""

from __future__ import annotations

import torch

from ..._torch_api.collectives import gather_rows
from ...groups import Group


def grouped_matmul(full: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor, out: torch.Tensor) -> None:
    """``out[t·k + j] = full[t] @ w[topk_ids[t, j]]`` for every valid expert id (``full [T, K]``, ``w [E, K, N]``,
    ``topk_ids [T, k]``, ``out [T·k, N]``)."""
    experts, k = w.shape[0], topk_ids.shape[-1]
    flat = topk_ids.reshape(-1).long()
    valid = (flat >= 0) & (flat < experts)
    key = torch.where(valid, flat, 0)  # a dropped slot is computed with expert 0, then not written
    order = torch.argsort(key, stable=True)
    rows = full[order // k]
    # Slots per expert without a host sync (``bincount`` reads its maximum back), so that a CUDA graph captures it.
    counts = torch.zeros(experts, dtype=torch.int64, device=key.device).scatter_add_(0, key, torch.ones_like(key))
    gmm = getattr(torch, "_grouped_mm", None)
    if gmm is not None and rows.is_cuda and rows.dtype == torch.bfloat16:
        res = gmm(rows, w, offs=torch.cumsum(counts, 0).to(torch.int32))
    elif rows.is_cuda and torch.cuda.is_current_stream_capturing():
        # No host-known group sizes under capture: every expert on every row, each row keeping its own expert's.
        res = torch.zeros((rows.shape[0], w.shape[2]), dtype=out.dtype, device=rows.device)
        mine = key[order]
        for e in range(experts):
            res = torch.where((mine == e)[:, None], rows @ w[e], res)
    else:
        res = torch.empty((rows.shape[0], w.shape[2]), dtype=out.dtype, device=rows.device)
        lo = 0
        for e, n in enumerate(counts.tolist()):
            res[lo : lo + n] = rows[lo : lo + n] @ w[e]
            lo += n
    out[order] = torch.where(valid[order][:, None], res.to(out.dtype), out[order])


def all_gather_grouped_matmul(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, g: Group, topk_ids: torch.Tensor) -> torch.Tensor:
    """The group's all-gather of the tokens ``x``, then :func:`grouped_matmul` on every rank (a stacked group's ranks
    one after the other); returns the gathered tokens."""
    full = gather_rows(x, g)
    if g.stacked:
        for r in range(g.world):
            grouped_matmul(full[r], w[r], topk_ids[r], out[r])
    else:
        grouped_matmul(full, w, topk_ids, out)
    return full
