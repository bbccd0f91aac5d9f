"""Launching a Triton kernel that calls NVSHMEM when ovl bootstrapped NVSHMEM itself (``_runner.nvshmem_direct``).

The counterpart of PyTorch's ``requires_nvshmem`` for a process whose NVSHMEM is nvshmem4py's: every launch passes
NVSHMEM's device bitcode as ``extern_libs`` (``put_signal_add`` resolves against it), and each compiled module gets
``nvshmemx_cumodule_init`` (nvshmem4py's ``module_init``) before its first launch. The latter is Triton's post-compile
hook, which runs after a kernel is compiled (or loaded from Triton's cache) and before ``run`` launches it, as
PyTorch's wrapper does; the hook is global, so it serves only the kernels registered here and hands every other
kernel to the hook that was set before. Kernels compiled before the wrapping are initialised when wrapped.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
#: id(JITFunction) -> the DirectNvshmem whose modules it initialises.
_registered: dict[int, Any] = {}
_previous_hook: list[Any] = []
_installed = [False]


def _post_compile_hook(*args: Any, **kwargs: Any) -> Any:
    info = kwargs.get("fn")
    jit = getattr(info, "jit_function", None)
    heap = _registered.get(id(jit)) if jit is not None else None
    if heap is not None and jit is not None:
        device = kwargs["compile"]["device"]
        kernel = jit.device_caches[device][0].get(kwargs["key"])
        if kernel is None:
            raise RuntimeError(f"Triton compiled {jit} but its kernel cache has no entry: NVSHMEM cannot initialise its module")
        heap.init_module(kernel)
    previous = _previous_hook[0] if _previous_hook else None
    return previous(*args, **kwargs) if previous is not None else None


def _install_hook() -> None:
    import triton

    with _lock:
        if _installed[0]:
            return
        _previous_hook[:] = [triton.knobs.runtime.jit_post_compile_hook]
        triton.knobs.runtime.jit_post_compile_hook = _post_compile_hook
        _installed[0] = True


class DirectKernel:
    """A ``@triton.jit`` function launched as ``kernel[grid](**args)`` with NVSHMEM's bitcode linked and its modules
    initialised by ``heap`` (a ``DirectNvshmem``)."""

    def __init__(self, fn: Any, heap: Any, name: str) -> None:
        self.fn, self.heap, self.name = fn, heap, name
        _install_hook()
        _registered[id(fn)] = heap
        for cache in list(getattr(fn, "device_caches", {}).values()):
            for kernel in list(cache[0].values()):
                heap.init_module(kernel)

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            return self.fn.run(*args, grid=grid, warmup=False, extern_libs=self.heap.extern_libs, **kwargs)

        return launch
