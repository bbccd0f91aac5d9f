"""A Mixtral-8x7B-shaped decoder (hidden 4096, 32 heads, 8 kv heads, 8 experts of intermediate 14336, top-2;
few layers, random weights) from ``transformers``, made tensor-parallel on ovl's operators by
``ovl_runtime.models.parallelize`` (experts by ``moe_all_gather_grouped_matmul`` and
``moe_grouped_matmul_reduce_scatter``): prefill, greedy decode steps, training steps. How to run it:
``model_example.py``'s docstring (``--prepare DIR``, one GPU with ``--world N``, or ``--torchrun``)."""

from __future__ import annotations

from model_example import run


def make(layers: int, tiny: bool):
    from transformers import MixtralConfig, MixtralForCausalLM

    if tiny:
        small = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
        return MixtralForCausalLM(MixtralConfig(**small, num_hidden_layers=layers, num_local_experts=4, num_experts_per_tok=2))

    config = MixtralConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_hidden_layers=layers,
        vocab_size=32000,
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=8192,
    )
    return MixtralForCausalLM(config)


if __name__ == "__main__":
    run(__doc__ or "", make)
