"""What the GPU tests share: whether their compiled kernels are at hand, the relative error
and seeded random tensors they compare with, MoE references' slot order, and the ``--prepare DIR`` entry point that
compiles their kernels on a machine with ovl's CLI. Imports torch only when called."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ovl_runtime._kernels import library as lib


def unavailable(keys: Sequence[lib.KernelKey]) -> str | None:
    """Why these tests cannot run here (no CUDA device, kernels neither found nor compilable), or None."""
    import torch

    if not torch.cuda.is_available():
        return "needs a CUDA device"
    missing = [k.dirname for k in keys if lib.find(k) is None]
    if missing and lib.compiler() is None:
        return f"compiled kernels missing ({', '.join(missing[:3])}...): set OVL_KERNELS or OVL_CLI"
    return None


def rel(got: Any, want: Any) -> float:
    """‖got − want‖ / ‖want‖ in float32."""
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def by_slot(ids: Any, per_expert: Callable[[int, Any], Any]) -> Any:
    """A MoE reference's rows in slot order ``t·k + j``: ``per_expert(e, slots)`` gives the rows of the slots
    routed to expert ``e`` (``ids`` ``[tokens, k]``), put back in place differentiably."""
    import torch

    flat = ids.reshape(-1).long()
    groups = [(e, torch.nonzero(flat == e).squeeze(1)) for e in torch.unique(flat).tolist()]
    rows = torch.cat([per_expert(e, sl) for e, sl in groups])
    return rows[torch.argsort(torch.cat([sl for _e, sl in groups]))]


def rand(*shape: int, seed: int = 0, dtype: Any = None) -> Any:
    """A normal tensor on the GPU (bf16 unless ``dtype`` names another) from its own seeded generator."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16 if dtype is None else dtype, generator=g)


def dtypes() -> list[Any]:
    """The torch dtypes the operators take (bf16, fp16), for tests parametrized over them (ids: their names)."""
    from ovl_runtime._torch_api.tensors import GPU_DTYPES

    return list(GPU_DTYPES)


def prepare_main(script: str, all_keys: Callable[[], Sequence[lib.KernelKey]]) -> None:
    """``python tests_gpu/<script> --prepare DIR [OP]``: compile every key the tests need (of operator ``OP`` alone: what
    the tests marked ``kernels(OP)`` need) into DIR."""
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--prepare":
        into = Path(sys.argv[2])
        for key in all_keys():
            if len(sys.argv) == 3 or key.op == sys.argv[3]:
                print(lib.ensure_compiled(key, into))
    else:
        sys.exit(f"usage: python tests_gpu/{script} --prepare DIR [OP]")


@contextlib.contextmanager
def counted_compiles() -> Iterator[dict[str, int]]:
    """Counts, inside the block, ovl compiles (the kernel library's ``compile_key``) and Triton JIT compiles
    (``triton.knobs.runtime.jit_cache_hook``, which lets each go on); both hooks restored after it."""
    import triton

    compiles = {"ovl": 0, "triton": 0}
    real, hook = lib.compile_key, triton.knobs.runtime.jit_cache_hook

    def counted(*a: Any, **kw: Any) -> Any:
        compiles["ovl"] += 1
        return real(*a, **kw)

    def jit_hook(*_a: Any, **_kw: Any) -> bool:
        compiles["triton"] += 1
        return False

    lib.compile_key = counted  # type: ignore[assignment]
    triton.knobs.runtime.jit_cache_hook = jit_hook
    try:
        yield compiles
    finally:
        lib.compile_key = real  # type: ignore[assignment]
        triton.knobs.runtime.jit_cache_hook = hook
