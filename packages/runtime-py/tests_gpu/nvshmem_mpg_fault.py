"""The fault case of the two-processes-on-one-GPU check (``nvshmem_mpg.py``): one rank stalls, the other fails within its
bound with ovl's named wait error, and nothing hangs.

Run under ``torchrun --nproc_per_node=2`` with both processes on one GPU (``CUDA_VISIBLE_DEVICES=0``):

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests_gpu/nvshmem_mpg_fault.py MANIFEST OUT [STALLED]

On the runner's own path (``gpu_process``: gloo group, NVSHMEM bootstrapped through nvshmem4py; ``GpuSession`` on the
direct heap): a warm-up launch and one checked epoch on every rank (it must pass), then an epoch in which rank
``STALLED`` (default 1) skips its launch. The other ranks' kernels wait for its data, give up after the manifest's
``waitTimeoutNs``, and every rank raises ``WaitTimeout`` from ``raise_wait_errors``. Each rank writes
``OUT/fault-rank<r>.json`` (marked before each step, so a process that NVSHMEM ends is named by its last step).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    manifest, out = Path(sys.argv[1]), Path(sys.argv[2])
    stalled = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    out.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ["RANK"])
    record: dict[str, object] = {"rank": rank, "stalled": stalled, "manifest": str(manifest)}
    path = out / f"fault-rank{rank}.json"

    def step(name: str, **fields: object) -> None:
        record["step"] = name
        record.update(fields)
        path.write_text(json.dumps(record, indent=2))

    from ovl_runtime import load_manifest
    from ovl_runtime._runner.torchrun import gpu_process
    from ovl_runtime.errors import RunnerError, WaitTimeout

    m = load_manifest(manifest)
    step("process group")
    with gpu_process([m]) as proc:
        import torch
        import torch.distributed as dist

        from ovl_runtime._runner.session import GpuSession

        record.update({"nvshmem": "direct" if proc.nvshmem is not None else "torch", "processGroup": dist.get_backend()})
        step("session")
        s = GpuSession(m, rank, torch.cuda.get_device_properties(0).multi_processor_count, nvshmem=proc.nvshmem)
        try:
            step("warm-up")
            s.launch(warm=True)
            s.sync()
            s.raise_wait_errors()
            dist.barrier()
            step("healthy epoch")
            gen = torch.Generator(device="cuda")
            gen.manual_seed(rank)
            s.init_buffers(gen)
            s.launch()
            s.sync()
            s.raise_wait_errors()
            dist.barrier()
            step("stalled epoch", boundS=m.wait_timeout_ns / 1e9)
            t0 = time.monotonic()
            if rank != stalled:
                s.launch()
            s.sync()
            try:
                s.raise_wait_errors()
                step("no error", elapsedS=time.monotonic() - t0, error=None)
            except WaitTimeout as exc:
                step("wait timeout", elapsedS=time.monotonic() - t0, error=exc.to_json())
            except RunnerError as exc:
                step("other error", elapsedS=time.monotonic() - t0, error=exc.to_json())
        finally:
            step("close")
            s.close()
            del s
    step("finalized", done=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
