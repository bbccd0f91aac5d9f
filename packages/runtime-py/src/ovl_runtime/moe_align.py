"""The import path of MoE part 1's routing kernels that emitted kernels name: an emitted ``<name>_routing.py``
(``@ovl/tlx-emitter``'s ``routingModule``) holds ``from ovl_runtime.moe_align import moe_align_count,
moe_align_scatter`` (an operator serving any row count: their unspecialised ``*_rows`` copies). The kernels live in :mod:`ovl_runtime.operators.ag_moe.routing_kernels`; this module keeps the
path those files use."""

from __future__ import annotations

from .operators.ag_moe.routing_kernels import moe_align_count, moe_align_count_rows, moe_align_scatter, moe_align_scatter_rows

__all__ = ["moe_align_count", "moe_align_count_rows", "moe_align_scatter", "moe_align_scatter_rows"]
