"""ovl's overlapped operators as PyTorch functions over the caller's tensors.

::

    import ovl_runtime.ops as ovl

    y = ovl.all_gather_matmul(x_shard, w, group)     # AllGather(x) @ w, the gather hidden behind the GEMM
    z = ovl.matmul_reduce_scatter(h, w2, group)      # ReduceScatter(h @ w2), the scatter hidden behind it

Semantics follow PyTorch's ``torch.ops.symm_mem.fused_all_gather_matmul`` /
``fused_matmul_reduce_scatter`` with the gather and scatter along rows (dimension 0):

- ``all_gather_matmul(x, w, group)``: ``x`` is this rank's ``[m, K]`` rows, ``w`` its
  ``[K, n]`` weight; returns ``cat(x over ranks) @ w``, ``[world·m, n]``.
  Under autograd, with ``w`` requiring grad, it records ``torch.ops.ovl.all_gather_matmul_gathered(x, w,
  group_name)``, which returns ``(cat(x over ranks) @ w, cat(x over ranks))``: the gathered rows copied from the
  kernel's buffer, for the weight gradient (see :mod:`ovl_runtime.operators.ag_gemm.autograd`).
- ``matmul_reduce_scatter(x, w, group)``: ``x`` is ``[M, k]``, ``w`` ``[k, N]`` (this rank's
  slice of the depth); returns this rank's ``M / world`` rows of ``Σ_ranks x @ w``.
- ``moe_all_gather_grouped_matmul(x, topk_ids, w, group)`` (MoE, TileLink's AG + Gather +
  GroupGEMM): ``x`` is this rank's ``[m, K]`` tokens, ``topk_ids`` the ``[world·m, k]`` int32
  experts of every rank's tokens (the same on every rank), ``w`` this rank's experts
  ``[E, K, n]``; returns ``C [world·m·k, n]`` with ``C[t·k + j] = x_all[t] @ w[topk_ids[t, j]]``.
  The routing tables are computed on the device (:mod:`ovl_runtime.operators.ag_moe.routing_kernels`): no host sync.
- ``matmul_all_reduce(x, w, group)`` (GEMM+AllReduce): ``x`` ``[M, k]``, ``w`` ``[k, N]`` (this
  rank's slice of the depth); returns ``Σ_ranks x @ w``, ``[M, N]``, on every rank. The
  partitioned AllReduce (the CLI's default: a direct ReduceScatter by SM pushes, then an
  AllGather of each reduced slab from its owner), not the tile-wise one.
- ``all_to_all_matmul(x, w, group)`` (AllToAll+GEMM): ``x`` ``[M, K]`` is this rank's send
  buffer, slab q (``M / world`` rows) going to rank q; returns ``received @ w`` ``[M, N]``,
  where slab q of ``received`` came from rank q.
- ``sequence_parallel_attention(q, kv, group, causal=...)`` (AllGather + attention): ``q``
  ``[s, H, D]`` this rank's ``s = S / world`` query positions (rank r holds ``r·s`` onward),
  ``kv`` ``[s, 2, Hkv, D]`` their keys (``kv[:, 0]``) and values (``kv[:, 1]``); every rank's
  kv is gathered behind the attention. Returns ``softmax(q kᵀ / √D) v`` ``[s, H, D]`` (query
  head h reads kv head ``h // (H / Hkv)``: MHA and GQA; ``causal``: position i sees keys ≤ i).
- ``tp_mlp(x, w_gate_up, w_down, group)`` (the MLP chain, :mod:`ovl_runtime.operators.mlp`): AllGather +
  gate/up GEMM with the SiLU-mul epilogue, then GEMM+ReduceScatter on its output in place;
  ``all_gather_matmul_silu_mul`` is its first stage alone.
- ``moe_grouped_matmul_reduce_scatter(h, topk_ids, topk_weights, w, group)`` (MoE part 2,
  :mod:`ovl_runtime.operators.moe_rs`): GroupGEMM + Scatter + TopK-reduce + ReduceScatter, routing on the
  device.

``group`` is a ``torch.distributed`` process group (one rank per process, under torchrun),
a :class:`~ovl_runtime.groups.OneGpuGroup` (every rank in this process on one GPU: each
tensor then carries the rank as its leading dimension, ``[world, ...]``), or the name of
either. Both are registered with ``torch.library`` (``torch.ops.ovl.all_gather_matmul``,
``torch.ops.ovl.matmul_reduce_scatter``, taking the group's name), so ``torch.compile``
traces them as single ops; :func:`fused_all_gather_matmul` and
:func:`fused_matmul_reduce_scatter` take PyTorch's argument lists.

Kernels come from ovl's compiler (:mod:`ovl_runtime._kernels.library`): compiled once per
(operator, world, M, N, K, dtype) with the compiler's tuned configuration, found on the
kernel search path or compiled on demand, and bound to the group once (buffers, streams)
— later calls only copy this rank's rows in and launch. Row counts that the compiled
kernels cannot take as they are (ReduceScatter slabs off whole 128-row blocks) are padded
with zero rows and the padding dropped from the result. Inputs are checked before any
launch: dtype, device, contiguity, 16-byte alignment, shapes; under torchrun, the first
call of a shape also checks that every rank passes the same shapes.

On-device tuning (off unless asked): :func:`tune` (or ``OVL_TUNE=1``) makes the first call of each AllGather+GEMM
and GEMM+ReduceScatter shape time the compiler's candidate compute configurations on this GPU against cuBLAS and bind
the fastest, cached per shape and GPU (:func:`tuned_cache`) so later processes bind it at once; :func:`tuned` says
what it chose.

Every operator has a backward pass (each operator's ``autograd`` module under :mod:`ovl_runtime.operators`: AllGather+GEMM's input gradient is a
GEMM+ReduceScatter and the reverse; attention's and the MoE operators' are plain torch and collectives).

A call is asynchronous on the current stream. Device-side waits are bounded: call
:func:`synchronize` to wait and raise ``WaitTimeout`` (rank, slot, value seen and
expected) if one gave up. Calls can be captured in a CUDA graph after one eager call.

Each operator's parts (torch.library op and fake, backward, references) live in its folder of
:mod:`ovl_runtime.operators`; this module offers one function per operator and the lifecycle of the bound
operators.
"""

from __future__ import annotations

from .._torch_api.registry import close_all, operators, synchronize
from .._tune.api import tune, tuned, tuned_cache
from ..operators.a2a_gemm.api import all_to_all_matmul
from ..operators.ag_attention.api import sequence_parallel_attention
from ..operators.ag_gemm.api import all_gather_matmul, fused_all_gather_matmul
from ..operators.ag_moe.api import moe_all_gather_grouped_matmul
from ..operators.gemm_ar.api import matmul_all_reduce
from ..operators.gemm_rs.api import fused_matmul_reduce_scatter, matmul_reduce_scatter
from ..operators.mlp.api import all_gather_matmul_silu_mul, tp_mlp
from ..operators.moe_rs.api import moe_grouped_matmul_reduce_scatter

__all__ = [
    "all_gather_matmul",
    "all_gather_matmul_silu_mul",
    "all_to_all_matmul",
    "close_all",
    "fused_all_gather_matmul",
    "fused_matmul_reduce_scatter",
    "matmul_all_reduce",
    "matmul_reduce_scatter",
    "moe_all_gather_grouped_matmul",
    "moe_grouped_matmul_reduce_scatter",
    "operators",
    "sequence_parallel_attention",
    "synchronize",
    "tp_mlp",
    "tune",
    "tuned",
    "tuned_cache",
]
