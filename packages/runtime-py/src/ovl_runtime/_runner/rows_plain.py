"""The plain sequence an any-row-count operator runs where it does not overlap (below the compiler's crossover, or
outside the row counts it serves), one per operator that has an any-row-count form, built from the group's plain
collectives (:mod:`ovl_runtime._torch_api.collectives`):

- ``ag-gemm``: every rank's rows gathered, then one matmul (``A`` is this rank's ``[M / world, K]`` shard);
- ``gemm-rs``: the rank's partial product, then the group's reduce-scatter by rows (``A`` is ``[M, K]``);
- ``gemm-ar``: the rank's partial product, then the group's all-reduce (``A`` is ``[M, K]``);
- ``a2a-gemm``: the group's all-to-all of row slabs, then one matmul (``A`` is this rank's ``[M, K]`` send buffer);
- ``ag-moe``: every rank's tokens gathered, then the grouped expert GEMM (``A`` is this rank's ``[M / world, K]`` tokens,
  ``topk`` every rank's experts; :mod:`ovl_runtime.operators.ag_moe.plain`);
- ``moe-rs``: the grouped expert GEMM of the slot rows, each token's k rows weighted and summed, then the group's
  reduce-scatter (``A`` is this rank's ``[T·k, I / world]`` slot rows, the rows T all ranks' tokens;
  :mod:`ovl_runtime.operators.moe_rs.plain`);
- ``ag-attention``: the group's all-gather of K/V, then torch's scaled_dot_product_attention over this rank's queries
  (``Q`` is this rank's ``[S / world, H·D]``, ``KV`` its ``[S / world, 2·Hkv·D]``; the rows are the sequence S).

Imports torch: GPU only (or a stacked CPU group).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .._manifest.types import Manifest
from .._torch_api.collectives import all_reduce, exchange_slabs, gather_rows, reduce_scatter_rows
from ..groups import Group
from ..operators.ag_attention.plain import plain_attention
from ..operators.ag_moe.plain import all_gather_grouped_matmul
from ..operators.moe_rs.plain import grouped_matmul_reduce_scatter


@dataclass(frozen=True)
class PlainPath:
    """How an operator's call is sized and run without overlap."""

    #: The call's row count M from its ``A`` and the world.
    rows: Callable[[torch.Tensor, int], int]
    #: Runs ``out = op(A, B, *more)`` on the group; returns the moved operand the call leaves (``A`` gathered), if any.
    run: Callable[..., torch.Tensor | None]
    #: The sequence, in words (for the log).
    what: str
    #: The names of the call's two inputs (``A`` and ``B``: the GEMM's operands).
    inputs: tuple[str, str] = ("A", "B")
    #: The call's other inputs ``run`` takes after the group, by name (``ag-moe``'s ``topk``).
    more: tuple[str, ...] = ()
    #: Where ``run`` depends on the compiled operator (attention's heads, scale and causality): ``run`` for a manifest.
    configure: Callable[[Manifest], Callable[..., torch.Tensor | None]] | None = None
    #: Where the row count depends on the compiled operator (moe-rs's k slot rows a token): ``rows`` for a manifest.
    sized: Callable[[Manifest], Callable[[torch.Tensor, int], int]] | None = None

    def for_manifest(self, m: Manifest) -> PlainPath:
        """This path with ``run`` and ``rows`` for ``m`` (itself where neither depends on it)."""
        path = self if self.configure is None else replace(self, run=self.configure(m), configure=None)
        return path if path.sized is None else replace(path, rows=path.sized(m), sized=None)


def _unconfigured(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, g: Group) -> None:
    raise AssertionError("this plain path runs for a manifest: PlainPath.for_manifest")


def _unsized(x: torch.Tensor, world: int) -> int:
    raise AssertionError("this plain path is sized for a manifest: PlainPath.for_manifest")


def _ag_gemm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, g: Group) -> torch.Tensor:
    gathered = gather_rows(x, g)
    torch.matmul(gathered, w, out=out)
    return gathered


def _gemm_rs(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, g: Group) -> None:
    out.copy_(reduce_scatter_rows(torch.matmul(x, w), g))


def _gemm_ar(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, g: Group) -> None:
    out.copy_(all_reduce(torch.matmul(x, w), g))


def _moe_rs_rows(m: Manifest) -> Callable[[torch.Tensor, int], int]:
    """moe-rs's token count from its slot rows ``h [T·k, I]``: k is the manifest's routing's."""
    k = m.buffer(m.reference.inputs["topk"]).shape[1]
    return lambda h, world: h.shape[-2] // k


def _a2a_gemm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, g: Group) -> torch.Tensor:
    exchanged = exchange_slabs(x, g)
    torch.matmul(exchanged, w, out=out)
    return exchanged


#: The plain path of each operator with an any-row-count form (``_kernels.library.ROWS_OPERATORS``).
PLAIN: dict[str, PlainPath] = {
    "ag-gemm": PlainPath(lambda x, world: x.shape[-2] * world, _ag_gemm, "gather, then matmul"),
    "gemm-rs": PlainPath(lambda x, world: x.shape[-2], _gemm_rs, "matmul, then reduce-scatter"),
    "gemm-ar": PlainPath(lambda x, world: x.shape[-2], _gemm_ar, "matmul, then all-reduce"),
    "a2a-gemm": PlainPath(lambda x, world: x.shape[-2], _a2a_gemm, "all-to-all, then matmul"),
    "ag-moe": PlainPath(lambda x, world: x.shape[-2] * world, all_gather_grouped_matmul, "gather, then grouped matmul", more=("topk",)),
    "moe-rs": PlainPath(
        _unsized,
        grouped_matmul_reduce_scatter,
        "grouped matmul, then reduce-scatter",
        more=("topk", "weights"),
        sized=_moe_rs_rows,
    ),
    "ag-attention": PlainPath(
        lambda q, world: q.shape[-2] * world, _unconfigured, "gather K/V, then attention", inputs=("Q", "KV"), configure=plain_attention
    ),
}
