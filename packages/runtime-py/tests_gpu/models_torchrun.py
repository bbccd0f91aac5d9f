"""``ovl_runtime.models.parallelize`` under torchrun (one rank per GPU, a process group): every rank builds the same
dense model (same seed), keeps its shards, and checks prefill logits, gradients and decode steps against the dense
model in bf16 tolerance (``models_support.check``). Exits non-zero if any rank fails.

    OVL_KERNELS=DIR torchrun --nproc_per_node=N packages/runtime-py/tests_gpu/models_torchrun.py [llama|mixtral ...]

The kernels are those of ``test_models_gpu.py`` (``python tests_gpu/test_models_gpu.py --prepare DIR``).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from models_support import BATCH, SEQ, check, dense_model

from ovl_runtime import ops
from ovl_runtime.models import parallelize


def main() -> None:
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    failed = 0
    for kind in sys.argv[1:] or ["llama", "mixtral"]:
        dense = dense_model(kind, "cuda")
        parallel = parallelize(dense, dist.group.WORLD)
        gen = torch.Generator(device="cuda").manual_seed(1)  # the same ids on every rank
        vocab = dense.config.vocab_size
        ids = torch.randint(0, vocab, (BATCH, SEQ), device="cuda", generator=gen)
        targets = torch.randint(0, vocab, (BATCH, SEQ), device="cuda", generator=gen)
        failures = check(dense, parallel, ids, targets)
        ops.synchronize()
        for f in failures:
            print(f"rank {rank} {kind}: FAIL {f}", flush=True)
        print(f"rank {rank} {kind}: {'ok' if not failures else f'{len(failures)} failures'}", flush=True)
        failed += len(failures)
        del dense, parallel
        ops.close_all()
        torch.cuda.empty_cache()
    total = torch.tensor([failed], device="cuda")
    dist.all_reduce(total)
    dist.destroy_process_group()
    sys.exit(1 if total.item() else 0)


if __name__ == "__main__":
    main()
