"""``ovl_runtime.models.parallelize`` on a GPU, every rank in one process (``OneGpuGroup``) at worlds 2, 4 and 8:
a LLaMA-3-8B-shaped decoder (hidden 4096, 32 heads, 8 kv heads, intermediate 14336; 2 layers) and a
Mixtral-8x7B-shaped one (8 experts, top-2; 1 layer), random weights in bf16, against the dense model: prefill
logits, every gradient after one backward, and two decode steps, within bf16 tolerance
(``models_support.check``).

Needs a CUDA device, ``transformers``, and the compiled kernels: the keys below on ``$OVL_KERNELS`` (made on a
machine with ovl's CLI by ``python tests_gpu/test_models_gpu.py --prepare DIR``) or a compiler at hand
(``$OVL_CLI``). Under torchrun, ``models_torchrun.py`` runs the same check with a process group.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from models_support import BATCH, SEQ, check, dense_model, keys  # noqa: E402
from support import prepare_main, unavailable  # noqa: E402

from ovl_runtime import ops as _ops  # noqa: E402, F401 - sets CUDA_DEVICE_MAX_CONNECTIONS before CUDA starts

CASES = [(kind, world) for kind in ("llama", "mixtral") for world in (2, 4, 8)]


def all_keys() -> list:
    return [k for kind, world in CASES for k in keys(kind, world)]


pytestmark = pytest.mark.skipif(unavailable(all_keys()) is not None, reason=unavailable(all_keys()) or "")


@pytest.mark.parametrize(("kind", "world"), CASES)
def test_the_parallel_model_matches_the_dense_one_in_bf16(kind, world):
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.models import parallelize

    dense = dense_model(kind, "cuda")
    parallel = parallelize(dense, OneGpuGroup(world))
    gen = torch.Generator(device="cuda").manual_seed(1)
    vocab = dense.config.vocab_size
    ids = torch.randint(0, vocab, (BATCH, SEQ), device="cuda", generator=gen)
    targets = torch.randint(0, vocab, (BATCH, SEQ), device="cuda", generator=gen)
    failures = check(dense, parallel, ids, targets)
    assert not failures, "\n".join(failures)


if __name__ == "__main__":
    prepare_main("test_models_gpu.py", all_keys)
