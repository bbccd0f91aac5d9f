"""Whole models on ovl's operators: a Hugging Face ``transformers`` decoder made tensor-parallel.

::

    from ovl_runtime.models import parallelize
    from ovl_runtime.groups import OneGpuGroup

    tp = parallelize(model, group)                # model: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, MixtralForCausalLM
    logits = tp(input_ids)                        # [batch, seq, vocab], the same on every rank; differentiable
    logits, cache = tp.prefill(input_ids)
    logits, cache = tp.decode(next_ids, cache)    # one step per call, on the KV cache
    grads = tp.shard_dense(dict(model.named_parameters()))  # the dense tensors cut as tp's parameters are
    keys = kernel_keys(model, world, [seq])       # the compiled operators it runs (to compile them elsewhere)

``group`` is any group of :mod:`ovl_runtime.groups`: under torchrun a process group (each rank builds the same
dense model and keeps its shards), a ``OneGpuGroup`` (every rank's shards stacked ``[world, ...]`` in this
process: one forward runs every rank), or an ``EmulatedGroup`` (the same on the CPU, each operator's compiled
manifest run by the CPU emulation). The dense model is only read; the result is a new module.

The mapping (Megatron's split with sequence parallelism; see :mod:`ovl_runtime._models.model`): q/k/v by
AllGather+GEMM (column-parallel by heads), attention on each rank's heads, o_proj by GEMM+ReduceScatter; SwiGLU
MLPs by ``tp_mlp``; routed experts by ``moe_all_gather_grouped_matmul`` and ``moe_grouped_matmul_reduce_scatter``
(router replicated, on each rank's rows); embedding and lm_head vocabulary-parallel; norms on each rank's rows.
``sequence_parallel=False`` keeps the activations replicated (row-parallel halves by ovl's GEMM+AllReduce, experts
in plain torch). Decode steps run replicated, plain GEMMs and sums (no overlap to win at a few rows).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from .._kernels.library import KernelKey
from .._models.kernels import model_keys
from .._models.model import KVCache, ParallelCausalLM
from .._models.plan import DECODERS, plan_model
from .._models.shard import cut, shard_specs
from .._torch_api.tensors import EMULATED_DTYPES, accepted_dtypes
from ..groups import DistGroup, EmulatedGroup, resolve_group

__all__ = ["SUPPORTED", "KVCache", "ParallelCausalLM", "kernel_keys", "parallelize"]

#: The ``transformers`` model classes :func:`parallelize` takes.
SUPPORTED = tuple(DECODERS)


def parallelize(model: nn.Module, group: Any, *, sequence_parallel: bool = True, device: Any = None) -> ParallelCausalLM:
    """A tensor-parallel copy of ``model`` over ``group`` running ovl's operators (see the module docstring).

    Every module is checked first: one ovl cannot parallelize (another type, heads or kv heads or the intermediate
    or vocabulary size not divisible by the world, an activation other than SiLU, dropout, a dtype the group does
    not run: bf16 on GPUs, float32 or bf16 emulated) raises ``UsageError`` naming its qualified name and the reason,
    before anything is sharded. ``device``: where the shards go (default: the current CUDA device; the CPU for an
    emulated group)."""
    g = resolve_group(group)
    emulated = isinstance(g, EmulatedGroup)
    plan = plan_model(model, g.world, tuple(accepted_dtypes(g)))
    if device is None:
        device = torch.device("cpu") if emulated else torch.device("cuda", torch.cuda.current_device())
    rank = g.rank if isinstance(g, DistGroup) else 0
    dense = dict(model.named_parameters(remove_duplicate=False))
    specs = shard_specs(plan, g.world)
    with torch.no_grad():
        tensors = {s.name: cut(s, lambda n: dense[n].detach(), g.world, g.stacked, rank).to(device=device, copy=True) for s in specs}
        rotary = copy.deepcopy(plan.rotary).to(device)
    return ParallelCausalLM(plan, g, specs, tensors, rotary, sequence_parallel)


def kernel_keys(
    model: nn.Module, world: int, tokens: Iterable[int], *, training: bool = False, sequence_parallel: bool = True
) -> list[KernelKey]:
    """The compiled operators :func:`parallelize`'s model of ``model`` runs at ``world`` ranks for prefills of
    ``tokens`` (batch × seq each; decode steps run none), with ``training`` their backward's too: compile them where
    ovl's CLI is (``ovl_runtime._kernels.library.ensure_compiled(key, into)``) and point ``OVL_KERNELS`` there."""
    plan = plan_model(model, world, tuple(EMULATED_DTYPES))
    return model_keys(plan, world, tokens, training, sequence_parallel)
