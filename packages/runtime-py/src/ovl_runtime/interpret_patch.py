"""Makes Triton's CPU interpreter (triton 3.6, ``triton/runtime/interpreter.py``) safe for
launches from several threads at once, as the interpreter engine of the emulation runs them
(ranks and streams as threads, each launch a ``fn[grid](...)``). Applied only while
emulating (``patched()``), undone afterwards. Three points of the interpreter:

1. **Program ids.** ``interpreter_builder`` is one module-level ``InterpreterBuilder`` whose
   ``grid_idx`` / ``grid_dim`` attributes ``tl.program_id`` / ``tl.num_programs`` read; a
   launch on another thread would overwrite them mid-kernel. Here they become properties of
   the class backed by a ``threading.local``: each thread sees its own launch's grid.
2. **``tl`` patching.** ``GridExecutor.__call__`` patches ``triton.language`` (its builtins,
   ``tl.tensor``'s operators, ``tl.range``...) through ``_patch_lang`` at the start of a
   launch and restores the originals at its end; a launch ending on one thread would
   unpatch ``tl`` under the kernels still running on others. Here the first ``_patch_lang``
   patches ``triton.language`` and ``triton.language.core`` (every module a jit function
   can see them through), later ones return a scope whose ``restore`` does nothing, and ``patched()``
   restores the first scope when the emulation ends. (Device-function calls,
   ``InterpretedFunction.__call__``, also call ``_patch_lang``: the same applies.)
3. **Argument write-back.** ``GridExecutor._restore_args_dev`` copies every tensor
   argument's host storage back onto the device storage after a launch. For CPU tensors
   ``_init_args_hst`` takes the storage itself (``storage.cpu()`` is the same storage), so
   the copy is the memory onto itself: useless, and not atomic — a peer's write (a signal
   add, a copy into a symmetric buffer) landing between its read and its write would be
   lost. Here the copy is skipped when both sides are the same memory.

4. **bf16 dots.** The interpreter holds bf16 values as their uint16 bit patterns and
   ``create_dot`` multiplies those integers; here bf16 operands are widened to float32
   first (exact), so a bf16 ``tl.dot`` accumulates in float32 as on the GPU.

Before the first launch, Triton's argument specialisation is run once on this thread: its
first call imports a package lazily, which two threads must not do at once.

Also, with NumPy >= 2.4 the interpreter's ``tl.tensor.__index__`` (``int()`` of a
1-element array) fails; the patched ``tl`` takes the element instead.
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

_lock = threading.Lock()
_depth = 0
_saved: dict[str, Any] = {}


def _grid_property(name: str, tls: threading.local) -> property:
    def get(self: Any) -> Any:
        return getattr(tls, name, None)

    def set_(self: Any, value: Any) -> None:
        setattr(tls, name, value)

    return property(get, set_, doc=f"{name} of the launch running on this thread (ovl_runtime.interpret_patch)")


def _warm_up() -> None:
    # Triton's argument specialisation imports modules lazily on its first call (the gluon
    # package); two launches starting together on two threads would race on that import.
    import importlib

    import torch
    from triton.runtime import jit

    with contextlib.suppress(ImportError):
        importlib.import_module("triton.experimental.gluon")
    for arg in (1, 1 << 40, 1.0, torch.zeros(1), torch.zeros(1, dtype=torch.int32)):
        jit.mangle_type(arg)


def _apply() -> None:
    from triton.runtime import interpreter as itp

    _warm_up()
    tls = threading.local()
    cls = itp.InterpreterBuilder
    _saved["builder_dict"] = {n: cls.__dict__.get(n) for n in ("grid_idx", "grid_dim")}
    _saved["instance"] = {n: itp.interpreter_builder.__dict__.pop(n) for n in ("grid_idx", "grid_dim") if n in itp.interpreter_builder.__dict__}
    cls.grid_idx = _grid_property("grid_idx", tls)
    cls.grid_dim = _grid_property("grid_dim", tls)

    original_patch = itp._patch_lang
    _saved["patch_lang"] = original_patch
    first: list[Any] = []
    first_lock = threading.Lock()

    class _KeepScope:
        def restore(self) -> None:
            pass

    def patch_lang_once(fn: Any) -> Any:
        with first_lock:
            if not first:
                # Both modules a jit function may see (kernels: triton.language; its own
                # jit helpers such as tl.zeros: triton.language.core), patched once.
                scope = original_patch(types.SimpleNamespace(__globals__={"tl": itp.tl, "core": itp.tl.core}))
                # NumPy >= 2.4 refuses int() of a 1-element 1-d array, which the interpreter's
                # scalars are (tl.range over program ids calls __index__).
                scope.set_attr(itp.tl.tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
                first.append(scope)
        return _KeepScope()

    _saved["first_scope"] = first
    itp._patch_lang = patch_lang_once

    _saved["restore_args_dev"] = itp.GridExecutor._restore_args_dev

    def restore_args_dev(self: Any, args_dev: Any, args_hst: Any, kwargs: Any, kwargs_hst: Any) -> None:
        # GridExecutor._restore_args_dev, less the copies of a storage onto itself.
        storages: dict[int, tuple[Any, Any]] = {}

        def from_cpu(dev: Any, hst: Any) -> None:
            if hasattr(dev, "data_ptr"):
                dev, hst = itp._unwrap_tensor(dev), itp._unwrap_tensor(hst)
                storages[dev.untyped_storage().data_ptr()] = (dev.untyped_storage(), hst.untyped_storage())
            elif isinstance(dev, tuple):
                for d, h in zip(dev, hst):
                    from_cpu(d, h)
            elif isinstance(dev, itp.TensorDescriptor):
                from_cpu(dev.base, hst.base)

        for d, h in zip(args_dev, args_hst):
            from_cpu(d, h)
        for key, d in kwargs.items():
            from_cpu(d, kwargs_hst[key])
        for dev, hst in storages.values():
            if dev.device == hst.device and dev.data_ptr() == hst.data_ptr():
                continue  # the same memory: a copy could only lose a concurrent peer write
            dev.copy_(hst)

    itp.GridExecutor._restore_args_dev = restore_args_dev

    original_dot = cls.create_dot
    _saved["create_dot"] = original_dot

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        # bf16 operands are held as their uint16 bit patterns: widen them to float32 first.
        return original_dot(self, _bf16_as_fp32(itp, a), _bf16_as_fp32(itp, b), d, input_precision, max_num_imprecise_acc)

    cls.create_dot = create_dot


def _bf16_as_fp32(itp: Any, h: Any) -> Any:
    if h.dtype.scalar != itp.tl.bfloat16:
        return h
    wide = (h.data.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return itp.TensorHandle(wide, itp.tl.float32)


def _undo() -> None:
    from triton.runtime import interpreter as itp

    cls = itp.InterpreterBuilder
    for n, v in _saved["builder_dict"].items():
        if v is None:
            delattr(cls, n)
        else:
            setattr(cls, n, v)
    for n, v in _saved["instance"].items():
        setattr(itp.interpreter_builder, n, v)
    itp._patch_lang = _saved["patch_lang"]
    for scope in _saved["first_scope"]:
        scope.restore()
    itp.GridExecutor._restore_args_dev = _saved["restore_args_dev"]
    cls.create_dot = _saved["create_dot"]
    _saved.clear()


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """The interpreter made thread-safe for the duration (re-entrant; undone by the outermost exit)."""
    global _depth
    with _lock:
        if _depth == 0:
            _apply()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _undo()
