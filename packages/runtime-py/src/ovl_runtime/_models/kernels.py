"""The compiled operators a parallel model runs, without running it: their kernel keys for a world, the token
counts of its prefills, and whether it trains — so that a machine with ovl's CLI can compile them for a GPU
machine without one (``OVL_KERNELS``), and a run can compile them up front.

The keys follow the operators' own: AllGather+GEMM on every padded token, GEMM+ReduceScatter on slabs padded to
whole 128-row blocks, GEMM+AllReduce on rows padded to whole ``world × 128`` blocks. Training adds each GEMM
operator's dual (its input gradient) and runs the MLP's first half unfused (AllGather+GEMM, then SiLU-mul); the
attention and expert backward passes are plain torch. Decode steps run no compiled operator.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._kernels.library import KernelKey, call_key
from .._torch_api.tensors import RS_ROW_BLOCK
from .plan import MlpPlan, ModelPlan
from .step import row_multiple


def _ceil(n: int, block: int) -> int:
    return -(-n // block) * block


class _Keys:
    """Keys in first-use order, each once; a GEMM operator's dual added with it when training."""

    def __init__(self, world: int, multiple: int, training: bool) -> None:
        self.world, self.multiple, self.training = world, multiple, training
        self.keys: dict[str, KernelKey] = {}

    def add(self, op: str, m: int, n: int, k: int, experts: int = 0, topk: int = 0) -> None:
        key = call_key(op, self.world, m, n, k, experts=experts, topk=topk)  # the key a call of these sizes binds
        self.keys.setdefault(key.dirname, key)

    def ag_gemm(self, tokens: int, n: int, k: int) -> None:
        """AllGather+GEMM on every padded token; its input gradient is a GEMM+ReduceScatter."""
        self.add("ag-gemm", self.padded(tokens), n, k)
        if self.training:
            self.add("gemm-rs", self.rs_rows(tokens), k, n)

    def gemm_rs(self, tokens: int, n: int, k: int) -> None:
        """GEMM+ReduceScatter on slabs of whole row blocks; its input gradient is an AllGather+GEMM."""
        self.add("gemm-rs", self.rs_rows(tokens), n, k)
        if self.training:
            self.add("ag-gemm", self.padded(tokens), k, n)

    def padded(self, tokens: int) -> int:
        return _ceil(tokens, self.multiple)

    def rs_rows(self, tokens: int) -> int:
        return self.world * _ceil(self.padded(tokens) // self.world, RS_ROW_BLOCK)


def model_keys(plan: ModelPlan, world: int, tokens: Iterable[int], training: bool, sequence_parallel: bool) -> list[KernelKey]:
    """Every kernel key of ``plan``'s prefills of ``tokens`` (batch × seq) tokens at ``world`` ranks, in first-use order."""
    ks = _Keys(world, row_multiple(plan, world), training)
    h = plan.hidden
    for t in tokens:
        if not sequence_parallel:  # replicated: the row-parallel halves by GEMM+AllReduce, the rest plain
            ar = _ceil(t, world * RS_ROW_BLOCK)
            for layer in plan.layers:
                ks.add("gemm-ar", ar, h, layer.attn.heads // world * layer.attn.head_dim)
                if isinstance(layer.mlp, MlpPlan):
                    ks.add("gemm-ar", ar, h, layer.mlp.intermediate // world)
            continue
        for layer in plan.layers:
            a, mlp = layer.attn, layer.mlp
            q, kv = a.heads // world * a.head_dim, a.kv_heads // world * a.head_dim
            ks.ag_gemm(t, q + 2 * kv, h)
            ks.gemm_rs(t, h, q)
            inter = mlp.intermediate // world
            if isinstance(mlp, MlpPlan):
                if training or mlp.bias:
                    ks.ag_gemm(t, 2 * inter, h)
                else:
                    ks.add("ag-gemm-silu", ks.padded(t), inter, h)
                ks.gemm_rs(t, h, inter)
            else:
                ks.add("ag-moe", ks.padded(t), 2 * inter, h, experts=mlp.experts, topk=mlp.topk)
                ks.add("moe-rs", ks.padded(t), h, inter, experts=mlp.experts, topk=mlp.topk)
        ks.ag_gemm(t, plan.vocab // world, h)
    return list(ks.keys.values())
