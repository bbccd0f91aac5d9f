"""A LLaMA-3-8B-shaped decoder (hidden 4096, 32 heads, 8 kv heads, intermediate 14336, vocabulary 128256; few
layers, random weights) from ``transformers``, made tensor-parallel on ovl's operators by
``ovl_runtime.models.parallelize``: prefill, greedy decode steps, training steps. How to run it:
``model_example.py``'s docstring (``--prepare DIR``, one GPU with ``--world N``, or ``--torchrun``)."""

from __future__ import annotations

from model_example import run


def make(layers: int, tiny: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    if tiny:
        return LlamaForCausalLM(
            LlamaConfig(
                hidden_size=64,
                intermediate_size=128,
                num_attention_heads=4,
                num_key_value_heads=2,
                num_hidden_layers=layers,
                vocab_size=256,
            )
        )

    config = LlamaConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_hidden_layers=layers,
        vocab_size=128256,
        rope_theta=500000.0,
        max_position_embeddings=8192,
    )
    return LlamaForCausalLM(config)


if __name__ == "__main__":
    run(__doc__ or "", make)
