"""MoE part 2 without overlap, as a torch user runs it: on every rank the grouped expert GEMM of its slot rows (each
slot ``t·k + j`` of ``h`` multiplied by its expert ``w[topk_ids[t, j]]``: ``ag_moe.plain.grouped_matmul`` with one slot a
"token"), each token's k rows weighted and summed, then the group's reduce-scatter of the token rows. What an operator
serving any token count runs where overlapping does not pay (``_runner.rows_plain.PLAIN``). A slot whose expert id lies
outside ``[0, E)`` adds nothing, as in the overlapped kernels. Imports torch.
"""

from __future__ import annotations

import torch

from ..._torch_api.collectives import reduce_scatter_rows
from ...groups import Group
from ..ag_moe.plain import grouped_matmul


def weighted_token_rows(h: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """One rank's ``[T, N]`` float32 rows ``Σ_j weights[t, j] · (h[t·k + j] @ w[topk_ids[t, j]])`` (``h [T·k, K]``,
    ``w [E, K, N]``, ``topk_ids`` and ``weights [T, k]``)."""
    tokens, k = topk_ids.shape
    slots = torch.zeros((tokens * k, w.shape[-1]), dtype=torch.float32, device=h.device)
    grouped_matmul(h, w, topk_ids.reshape(-1, 1), slots)
    return (slots.view(tokens, k, -1) * weights.float()[..., None]).sum(1)


def grouped_matmul_reduce_scatter(
    h: torch.Tensor, w: torch.Tensor, out: torch.Tensor, g: Group, topk_ids: torch.Tensor, weights: torch.Tensor
) -> None:
    """:func:`weighted_token_rows` on every rank (a stacked group's ranks one after the other), then the group's
    reduce-scatter of the token rows in the output's type: rank r keeps tokens ``r·T/W ..``."""
    if g.stacked:
        rows = torch.stack([weighted_token_rows(h[r], w[r], topk_ids[r], weights[r]) for r in range(g.world)])
    else:
        rows = weighted_token_rows(h, w, topk_ids, weights)
    out.copy_(reduce_scatter_rows(rows.to(out.dtype), g))
