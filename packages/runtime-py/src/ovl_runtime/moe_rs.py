"""The import path of MoE part 2's runner kernels that emitted kernels name: an emitted ``op_moe_rs.py``
(``@ovl/tlx-emitter``'s ``moeRsModule``) holds ``from ovl_runtime.moe_rs import moe_permute_rows, moe_slab_expect,
moe_slab_notify, moe_topk_reduce_rs, moe_topk_sum`` (an operator for any token count imports their ``_rows`` forms,
never specialised on the sizes that change with the count, under the same names). The kernels live in
:mod:`ovl_runtime.operators.moe_rs.kernels`; this module keeps the path those files use."""

from __future__ import annotations

from .operators.moe_rs.kernels import (
    moe_permute_rows,
    moe_permute_rows_rows,
    moe_slab_expect,
    moe_slab_expect_rows,
    moe_slab_notify,
    moe_topk_reduce_rs,
    moe_topk_reduce_rs_rows,
    moe_topk_sum,
    moe_topk_sum_rows,
)

__all__ = [
    "moe_permute_rows",
    "moe_permute_rows_rows",
    "moe_slab_expect",
    "moe_slab_expect_rows",
    "moe_slab_notify",
    "moe_topk_reduce_rs",
    "moe_topk_reduce_rs_rows",
    "moe_topk_sum",
    "moe_topk_sum_rows",
]
