"""The parallel model's parameters cut from the dense model's tensors, by name.

:func:`shard_specs` lists, for every parameter of the parallel model, the dense tensors it comes from and how:
replicated (the same on every rank: norms, routers, the biases added after a ReduceScatter) or one
slice per rank, laid out ``[in, out]`` as the GEMMs read them:

- q/k/v (column-parallel by heads): rank r's query heads ``r·H/W ..`` and kv heads ``r·Hkv/W ..``, fused
  ``[hidden, (H/W + 2·Hkv/W)·D]`` (q, then k, then v); o_proj (row-parallel): the matching ``[H/W·D, hidden]`` rows;
- SwiGLU MLP: ``[hidden, 2·I/W]`` = ``[gate | up]`` of rank r's intermediate columns, down ``[I/W, hidden]``;
- experts (each rank holds its ``I/W`` slice of every expert): ``[E, hidden, 2·I/W]`` and ``[E, I/W, hidden]``;
- the embedding (vocabulary-parallel): rank r's ``V/W`` rows ``[V/W, hidden]``; lm_head likewise, laid out
  ``[hidden, V/W]``; tied to the embedding, it is the embedding's shard transposed at run time, not a parameter.

The same specs cut any tensors named like the dense model's parameters: its gradients, to compare with the parallel
model's (:meth:`ovl_runtime.models.ParallelCausalLM.shard_dense`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .plan import MlpPlan, ModelPlan, MoePlan

Get = Callable[[str], torch.Tensor]


@dataclass(frozen=True)
class ShardSpec:
    """One parameter of the parallel model: ``cut(get, rank)`` (``rank`` None: replicated) from dense tensors."""

    name: str
    replicated: bool
    cut: Callable[[Get, int], torch.Tensor]


def _rows(t: torch.Tensor, r: int, n: int) -> torch.Tensor:
    return t[r * n : (r + 1) * n]


def _attention_specs(prefix: str, plan: ModelPlan, i: int, world: int) -> list[ShardSpec]:
    a = plan.layers[i].attn
    hq, hkv = a.heads // world * a.head_dim, a.kv_heads // world * a.head_dim
    name = a.name

    def qkv(get: Get, r: int, part: str) -> torch.Tensor:
        q, k, v = (get(f"{name}.{p}_proj.{part}") for p in "qkv")
        return torch.cat([_rows(q, r, hq), _rows(k, r, hkv), _rows(v, r, hkv)], dim=0)

    specs = [
        ShardSpec(f"{prefix}.w_qkv", False, lambda get, r: qkv(get, r, "weight").t().contiguous()),
        ShardSpec(f"{prefix}.w_o", False, lambda get, r: get(f"{name}.o_proj.weight")[:, r * hq : (r + 1) * hq].t().contiguous()),
    ]
    if a.qkv_bias:
        specs.append(ShardSpec(f"{prefix}.b_qkv", False, lambda get, r: qkv(get, r, "bias").contiguous()))
    if a.o_bias:
        specs.append(_same(f"{prefix}.b_o", f"{name}.o_proj.bias"))
    return specs


def _mlp_specs(prefix: str, m: MlpPlan, world: int) -> list[ShardSpec]:
    n, name = m.intermediate // world, m.name

    def gate_up(get: Get, r: int, part: str) -> torch.Tensor:
        return torch.cat([_rows(get(f"{name}.gate_proj.{part}"), r, n), _rows(get(f"{name}.up_proj.{part}"), r, n)], dim=0)

    specs = [
        ShardSpec(f"{prefix}.w_gate_up", False, lambda get, r: gate_up(get, r, "weight").t().contiguous()),
        ShardSpec(f"{prefix}.w_down", False, lambda get, r: get(f"{name}.down_proj.weight")[:, r * n : (r + 1) * n].t().contiguous()),
    ]
    if m.bias:
        specs.append(ShardSpec(f"{prefix}.b_gate_up", False, lambda get, r: gate_up(get, r, "bias").contiguous()))
        specs.append(_same(f"{prefix}.b_down", f"{name}.down_proj.bias"))
    return specs


def _moe_specs(prefix: str, m: MoePlan, world: int) -> list[ShardSpec]:
    n, inter, name = m.intermediate // world, m.intermediate, m.name

    def gate_up(get: Get, r: int) -> torch.Tensor:
        up = get(f"{name}.experts.gate_up_proj")  # [E, 2I, H]: gate rows, then up rows
        return torch.cat([up[:, r * n : (r + 1) * n], up[:, inter + r * n : inter + (r + 1) * n]], dim=1).transpose(1, 2).contiguous()

    return [
        _same(f"{prefix}.router", f"{name}.gate.weight"),
        ShardSpec(f"{prefix}.w_gate_up", False, gate_up),
        ShardSpec(
            f"{prefix}.w_down",
            False,
            lambda get, r: get(f"{name}.experts.down_proj")[:, :, r * n : (r + 1) * n].transpose(1, 2).contiguous(),
        ),
    ]


def _same(name: str, dense: str) -> ShardSpec:
    """A replicated parameter: the dense tensor ``dense`` itself."""
    return ShardSpec(name, True, lambda get, r: get(dense))


def shard_specs(plan: ModelPlan, world: int) -> list[ShardSpec]:
    """Every parameter of the parallel model for ``plan`` at ``world`` ranks, in module order."""
    vl = plan.vocab // world
    specs = [ShardSpec("embed", False, lambda get, r: _rows(get("model.embed_tokens.weight"), r, vl).contiguous())]
    for i, layer in enumerate(plan.layers):
        p = f"layers.{i}"
        specs.append(_same(f"{p}.input_norm", f"{layer.name}.input_layernorm.weight"))
        specs.append(_same(f"{p}.post_norm", f"{layer.name}.post_attention_layernorm.weight"))
        specs += _attention_specs(f"{p}.attn", plan, i, world)
        mlp = layer.mlp
        specs += _mlp_specs(f"{p}.mlp", mlp, world) if isinstance(mlp, MlpPlan) else _moe_specs(f"{p}.mlp", mlp, world)
    specs.append(_same("norm", "model.norm.weight"))
    if not plan.tied:
        specs.append(ShardSpec("lm_head", False, lambda get, r: _rows(get("lm_head.weight"), r, vl).t().contiguous()))
    return specs


def cut(spec: ShardSpec, get: Get, world: int, stacked: bool, rank: int) -> torch.Tensor:
    """``spec``'s tensor: replicated as it is; otherwise every rank's slice stacked ``[world, ...]`` (a stacked
    group) or ``rank``'s slice."""
    if spec.replicated:
        return spec.cut(get, 0)
    if stacked:
        return torch.stack([spec.cut(get, r) for r in range(world)])
    return spec.cut(get, rank)
