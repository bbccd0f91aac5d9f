"""What the parallelized-model GPU checks share (``test_models_gpu.py`` with every rank in one process,
``models_torchrun.py`` under torchrun): the LLaMA-3-8B- and Mixtral-8x7B-shaped configs with few layers, the kernel
keys they need, and one check of a parallel model against the dense one.

The dense model and the parallel one run in bf16; both are compared with the dense model in float32 (same
weights): the parallel model's error must stay within three times the dense bf16 model's own error plus 5e-3
(bf16 tolerance, whatever the GEMMs' summation order or a near-tie routed to another expert), for the prefill logits, every parameter's gradient after
one backward, and the logits of two decode steps."""

from __future__ import annotations

import copy
from typing import Any

#: Prefill tokens: 2 sequences of 504, 1008 tokens: not a power of two, a multiple of 16 (no padding at any world).
BATCH, SEQ = 2, 504
DECODE_STEPS = 2


def config(kind: str) -> Any:
    import transformers as t

    common = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192)
    if kind == "llama":  # LLaMA-3-8B-shaped, 2 layers
        return t.LlamaConfig(**common, num_hidden_layers=2, vocab_size=128256, rope_theta=500000.0)
    if kind == "mixtral":  # Mixtral-8x7B-shaped, 1 layer
        return t.MixtralConfig(**common, num_hidden_layers=1, vocab_size=32000, num_local_experts=8, num_experts_per_tok=2)
    raise ValueError(kind)


def dense_model(kind: str, device: Any, seed: int = 0) -> Any:
    """The dense model, random weights (the same for every caller of the same seed), bf16, on ``device``."""
    import torch
    import transformers as t

    torch.manual_seed(seed)
    cls = t.LlamaForCausalLM if kind == "llama" else t.MixtralForCausalLM
    with torch.device(device):
        model = cls(config(kind))
    return model.to(torch.bfloat16)


def keys(kind: str, world: int) -> list[Any]:
    """The kernel keys of a training prefill and an inference one (built on the meta device: no memory)."""
    import torch
    import transformers as t

    from ovl_runtime.models import kernel_keys

    cls = t.LlamaForCausalLM if kind == "llama" else t.MixtralForCausalLM
    with torch.device("meta"):
        model = cls(config(kind))
    found = {}
    for training in (True, False):
        for k in kernel_keys(model, world, [BATCH * SEQ], training=training):
            found[k.dirname] = k
    return list(found.values())


def rel(got: Any, want: Any) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def check(dense: Any, parallel: Any, ids: Any, targets: Any) -> list[str]:
    """The parallel model against the dense one (see the module docstring); the failures, described."""
    import torch

    ref = copy.deepcopy(dense).float()
    failures: list[str] = []

    def compare(what: str, got: Any, bf16: Any, fp32: Any) -> None:
        e, base = rel(got, fp32), rel(bf16, fp32)
        if not e <= 3 * base + 5e-3:
            failures.append(f"{what}: parallel rel error {e:.3g} vs the dense bf16 model's {base:.3g}")

    def loss(logits: Any) -> Any:
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))

    logits = {"ref": ref(ids).logits, "dense": dense(ids).logits, "parallel": parallel(ids)}
    compare("prefill logits", logits["parallel"], logits["dense"], logits["ref"])
    for name in logits:
        loss(logits[name]).backward()
    grads = {
        m: parallel.shard_dense({n: p.grad for n, p in model.named_parameters(remove_duplicate=False)})
        for m, model in (("ref", ref), ("dense", dense))
    }
    for n, p in parallel.named_parameters():
        compare(f"gradient of {n}", p.grad, grads["dense"][n], grads["ref"][n])
    with torch.no_grad():
        out_ref, out_dense = ref(ids, use_cache=True), dense(ids, use_cache=True)
        _, cache = parallel.prefill(ids)
        nxt = out_ref.logits[:, -1].argmax(-1)
        for step in range(DECODE_STEPS):
            out_ref = ref(nxt[:, None], past_key_values=out_ref.past_key_values, use_cache=True)
            out_dense = dense(nxt[:, None], past_key_values=out_dense.past_key_values, use_cache=True)
            got, cache = parallel.decode(nxt, cache)
            compare(f"decode step {step} logits", got, out_dense.logits, out_ref.logits)
            nxt = out_ref.logits[:, -1].argmax(-1)
    return failures
