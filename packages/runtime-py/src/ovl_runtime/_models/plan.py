"""What :func:`ovl_runtime.models.parallelize` reads from a Hugging Face ``transformers`` decoder, checked before
anything is sharded.

:func:`plan_model` walks the model (``<Arch>ForCausalLM``: ``model.embed_tokens``, ``model.layers[i]`` of
``input_layernorm``, ``self_attn`` (q/k/v/o ``nn.Linear``), ``post_attention_layernorm`` and ``mlp``,
``model.norm``, ``model.rotary_emb``, ``lm_head``) and returns a :class:`ModelPlan` of the sizes and the modules
that hold the dense weights; the model is only read. Every module ovl cannot parallelize is collected with its
qualified name and the reason, and a :class:`~ovl_runtime.errors.UsageError` lists them all: a module of another
type (or any extra submodule), heads or kv heads or the intermediate or vocabulary size not divisible by the
world, an activation other than SiLU, attention dropout or router jitter, mixed or unsupported dtypes.

Supported: LLaMA, Mistral and Qwen2 (dense SwiGLU MLPs; Qwen2's q/k/v biases; sliding windows) and Mixtral
(top-k routed experts, transformers 5's fused expert tensors).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import UsageError

#: The decoders parallelize takes, by class name, and their decoder layer's class.
DECODERS = {
    "LlamaForCausalLM": "LlamaDecoderLayer",
    "MistralForCausalLM": "MistralDecoderLayer",
    "Qwen2ForCausalLM": "Qwen2DecoderLayer",
    "MixtralForCausalLM": "MixtralDecoderLayer",
}
ATTENTIONS = ("LlamaAttention", "MistralAttention", "Qwen2Attention", "MixtralAttention")
DENSE_MLPS = ("LlamaMLP", "MistralMLP", "Qwen2MLP")
SPARSE_MOES = ("MixtralSparseMoeBlock",)
NORMS = ("LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "MixtralRMSNorm")
LAYER_CHILDREN = {"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"}


@dataclass(frozen=True)
class AttentionPlan:
    name: str
    module: nn.Module
    heads: int
    kv_heads: int
    head_dim: int
    scaling: float
    sliding_window: int | None
    qkv_bias: bool
    o_bias: bool


@dataclass(frozen=True)
class MlpPlan:
    """A SwiGLU MLP: ``down(silu(gate(x)) * up(x))``."""

    name: str
    module: nn.Module
    intermediate: int
    bias: bool


@dataclass(frozen=True)
class MoePlan:
    """Routed experts: a replicated router (softmax, top-k, renormalised), each expert a SwiGLU MLP."""

    name: str
    module: nn.Module
    experts: int
    topk: int
    intermediate: int


@dataclass(frozen=True)
class LayerPlan:
    name: str
    input_eps: float
    post_eps: float
    attn: AttentionPlan
    mlp: MlpPlan | MoePlan


@dataclass(frozen=True)
class ModelPlan:
    arch: str
    hidden: int
    vocab: int
    dtype: torch.dtype
    layers: tuple[LayerPlan, ...]
    norm_eps: float
    rotary: nn.Module
    tied: bool


class _Refusals:
    """The modules ovl cannot parallelize, by qualified name, with the reason."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, name: str, reason: str) -> None:
        self.items.append((name, reason))

    def raise_any(self, world: int) -> None:
        if self.items:
            lines = "; ".join(f"{name}: {reason}" for name, reason in self.items)
            raise UsageError(f"parallelize (world {world}) refuses the model, nothing was sharded: {lines}")


def _kind(m: object) -> str:
    return type(m).__name__


def _split(refuse: _Refusals, name: str, what: str, n: int, world: int) -> None:
    if n % world:
        refuse.add(name, f"{what} ({n}) do not split over {world} ranks")


def _linear(refuse: _Refusals, parent: nn.Module, pname: str, child: str, shape: tuple[int, int]) -> bool:
    """``parent.child`` is a plain ``nn.Linear`` of ``[out, in]`` = ``shape``; whether it has a bias."""
    lin = getattr(parent, child, None)
    full = f"{pname}.{child}" if pname else child
    if type(lin) is not nn.Linear:
        refuse.add(full, f"{_kind(lin)} is not an nn.Linear (quantised or wrapped linears are not sharded)")
        return False
    if tuple(lin.weight.shape) != shape:
        refuse.add(full, f"weight {tuple(lin.weight.shape)}, expected {shape}")
    return lin.bias is not None


def _eps(norm: object) -> float:
    return float(getattr(norm, "variance_epsilon", 0.0))


def _norm(refuse: _Refusals, m: object, name: str, hidden: int) -> None:
    if _kind(m) not in NORMS or not isinstance(m, nn.Module):
        refuse.add(name, f"{_kind(m)} is not an RMSNorm ovl knows ({', '.join(NORMS)})")
    elif tuple(getattr(m, "weight", torch.empty(0)).shape) != (hidden,) or not isinstance(getattr(m, "variance_epsilon", None), float):
        refuse.add(name, "an RMSNorm without a [hidden] weight and a float variance_epsilon")


def _attention(refuse: _Refusals, attn: nn.Module, name: str, config: object, hidden: int, world: int) -> AttentionPlan | None:
    if _kind(attn) not in ATTENTIONS:
        refuse.add(name, f"{_kind(attn)} is not an attention ovl parallelizes ({', '.join(ATTENTIONS)})")
        return None
    extra = {n for n, _ in attn.named_children()} - {"q_proj", "k_proj", "v_proj", "o_proj"}
    if extra:
        refuse.add(name, f"submodules {sorted(extra)} beside q/k/v/o_proj (per-head norms and the like are not parallelized)")
    heads = int(getattr(config, "num_attention_heads", 0))
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    d = int(getattr(attn, "head_dim", 0))
    _split(refuse, name, "attention heads", heads, world)
    if kv_heads % world:
        refuse.add(name, f"kv heads ({kv_heads}) do not split over {world} ranks (replicating kv heads is not implemented)")
    if float(getattr(config, "attention_dropout", 0.0) or 0.0) != 0.0:
        refuse.add(name, "attention dropout is not implemented")
    qb = _linear(refuse, attn, name, "q_proj", (heads * d, hidden))
    kb = _linear(refuse, attn, name, "k_proj", (kv_heads * d, hidden))
    vb = _linear(refuse, attn, name, "v_proj", (kv_heads * d, hidden))
    ob = _linear(refuse, attn, name, "o_proj", (hidden, heads * d))
    if not qb == kb == vb:
        refuse.add(name, "q, k and v projections must all have biases or none")
    window = getattr(attn, "sliding_window", None) if hasattr(attn, "sliding_window") else getattr(config, "sliding_window", None)
    scaling = float(getattr(attn, "scaling", d**-0.5))
    return AttentionPlan(name, attn, heads, kv_heads, d, scaling, int(window) if window else None, qb, ob)


def _silu(refuse: _Refusals, name: str, config: object) -> None:
    act = getattr(config, "hidden_act", None)
    if act != "silu":
        refuse.add(name, f"activation {act!r}: the MLPs are SwiGLU (silu)")


def _mlp(refuse: _Refusals, mlp: nn.Module, name: str, config: object, hidden: int, world: int) -> MlpPlan | MoePlan | None:
    _silu(refuse, name, config)
    if _kind(mlp) in DENSE_MLPS:
        inter = int(getattr(mlp, "intermediate_size", 0))
        _split(refuse, name, "intermediate columns", inter, world)
        biases = {_linear(refuse, mlp, name, c, s) for c, s in (("gate_proj", (inter, hidden)), ("up_proj", (inter, hidden)))}
        biases.add(_linear(refuse, mlp, name, "down_proj", (hidden, inter)))
        if len(biases) > 1:
            refuse.add(name, "gate, up and down projections must all have biases or none")
        return MlpPlan(name, mlp, inter, True in biases)
    if _kind(mlp) in SPARSE_MOES:
        return _moe(refuse, mlp, name, config, hidden, world)
    refuse.add(name, f"{_kind(mlp)} is not an MLP ovl parallelizes ({', '.join(DENSE_MLPS + SPARSE_MOES)})")
    return None


def _moe(refuse: _Refusals, moe: nn.Module, name: str, config: object, hidden: int, world: int) -> MoePlan | None:
    experts_mod, gate = getattr(moe, "experts", None), getattr(moe, "gate", None)
    up, down = getattr(experts_mod, "gate_up_proj", None), getattr(experts_mod, "down_proj", None)
    if not isinstance(up, nn.Parameter) or not isinstance(down, nn.Parameter) or up.dim() != 3:
        refuse.add(f"{name}.experts", "experts are not transformers 5's fused gate_up_proj [E, 2I, H] and down_proj [E, H, I] tensors")
        return None
    experts, inter = up.shape[0], up.shape[1] // 2
    if tuple(up.shape) != (experts, 2 * inter, hidden) or tuple(down.shape) != (experts, hidden, inter):
        refuse.add(f"{name}.experts", f"gate_up_proj {tuple(up.shape)} and down_proj {tuple(down.shape)} are not [E, 2I, H] and [E, H, I]")
    if tuple(getattr(gate, "weight", torch.empty(0)).shape) != (experts, hidden) or getattr(gate, "bias", None) is not None:
        refuse.add(f"{name}.gate", f"the router is not a [{experts}, {hidden}] weight without bias")
    if float(getattr(moe, "jitter_noise", 0.0) or 0.0) != 0.0:
        refuse.add(name, "router jitter noise is not implemented")
    _split(refuse, name, "expert intermediate columns", inter, world)
    topk = int(getattr(moe, "top_k", 0) or getattr(config, "num_experts_per_tok", 0))
    if not 1 <= topk <= experts:
        refuse.add(name, f"top-k {topk} outside [1, {experts}]")
    return MoePlan(name, moe, experts, topk, inter)


def plan_model(model: nn.Module, world: int, dtypes: tuple[torch.dtype, ...]) -> ModelPlan:
    """The plan of ``model`` for ``world`` ranks (see the module docstring); raises ``UsageError`` naming every
    module it refuses. ``dtypes``: the parameter dtypes the group runs."""
    refuse = _Refusals()
    arch = _kind(model)
    if arch not in DECODERS:
        raise UsageError(f"parallelize: {arch} is not a decoder ovl parallelizes (supported: {', '.join(DECODERS)})")
    config = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    hidden = int(getattr(config, "hidden_size", 0))
    vocab = int(getattr(config, "vocab_size", 0))
    found = {p.dtype for p in model.parameters()}
    if len(found) != 1 or next(iter(found)) not in dtypes:
        refuse.add(arch, f"parameters are {sorted(str(d) for d in found)}; this group runs one of {', '.join(str(d) for d in dtypes)}")
    extra_top = {n for n, _ in model.named_children()} - {"model", "lm_head"}
    extra_inner = {n for n, _ in inner.named_children()} - {"embed_tokens", "layers", "norm", "rotary_emb"} if inner is not None else set()
    for n in sorted(extra_top) + [f"model.{n}" for n in sorted(extra_inner)]:
        refuse.add(n, "a submodule ovl does not know where to place")
    if type(getattr(inner, "embed_tokens", None)) is not nn.Embedding:
        refuse.add("model.embed_tokens", "not an nn.Embedding")
    if not isinstance(getattr(inner, "rotary_emb", None), nn.Module):
        refuse.add("model.rotary_emb", "no rotary embedding module")
    _split(refuse, "lm_head", "vocabulary rows", vocab, world)
    head_bias = _linear(refuse, model, "", "lm_head", (vocab, hidden))
    if head_bias:
        refuse.add("lm_head", "a bias on the output projection is not implemented")
    _norm(refuse, getattr(inner, "norm", None), "model.norm", hidden)
    layers: list[LayerPlan] = []
    for i, layer in enumerate(getattr(inner, "layers", [])):
        name = f"model.layers.{i}"
        if _kind(layer) != DECODERS[arch]:
            refuse.add(name, f"{_kind(layer)} is not a {DECODERS[arch]}")
            continue
        extra = {n for n, _ in layer.named_children()} - LAYER_CHILDREN
        if extra:
            refuse.add(name, f"submodules {sorted(extra)} beside attention, MLP and norms")
        _norm(refuse, layer.input_layernorm, f"{name}.input_layernorm", hidden)
        _norm(refuse, layer.post_attention_layernorm, f"{name}.post_attention_layernorm", hidden)
        attn = _attention(refuse, layer.self_attn, f"{name}.self_attn", config, hidden, world)
        mlp = _mlp(refuse, layer.mlp, f"{name}.mlp", config, hidden, world)
        if attn is not None and mlp is not None:
            layers.append(LayerPlan(name, _eps(layer.input_layernorm), _eps(layer.post_attention_layernorm), attn, mlp))
    refuse.raise_any(world)
    assert isinstance(inner, nn.Module)
    tied = getattr(model.lm_head, "weight", None) is getattr(inner.embed_tokens, "weight", None)
    rotary = inner.rotary_emb
    assert isinstance(rotary, nn.Module)
    return ModelPlan(arch, hidden, vocab, next(iter(found)), tuple(layers), _eps(inner.norm), rotary, tied)
