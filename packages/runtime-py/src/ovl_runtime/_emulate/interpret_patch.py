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

4. **bf16 arithmetic.** The interpreter holds bf16 values as their uint16 bit patterns,
   and ``create_dot``, ``binary_op``, ``unary_op``, ``create_fma`` and ``create_clampf``
   compute on those integers; it has no ``get_bf16`` (a bf16 constant). Here bf16 operands
   are widened to float32 (exact); a dot accumulates in float32 as on the GPU, other
   results are rounded back to bf16 (to nearest even).

5. **Rewrites.** Each jit function is rewritten (its AST transformed and compiled) on its
   first call; CPython 3.11's ``compile()`` of ASTs is not safe from several threads at once
   (``SystemError: AST constructor recursion depth mismatch``). Here rewrites take a lock.

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
    _saved["instance"] = {
        n: itp.interpreter_builder.__dict__.pop(n) for n in ("grid_idx", "grid_dim") if n in itp.interpreter_builder.__dict__
    }
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

    # bf16 arithmetic: widen to float32, compute, round back to bf16 (nearest even).
    for name in ("binary_op", "unary_op", "create_fma", "create_clampf"):
        _saved[name] = cls.__dict__[name]
    binary, unary, fma, clampf = (_saved[n] for n in ("binary_op", "unary_op", "create_fma", "create_clampf"))

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if lhs.dtype.scalar != itp.tl.bfloat16:
            return binary(self, lhs, rhs, op)
        return _narrow(itp, binary(self, _bf16_as_fp32(itp, lhs), _bf16_as_fp32(itp, rhs), op))

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if arg.dtype.scalar != itp.tl.bfloat16:
            return unary(self, arg, op)
        return _narrow(itp, unary(self, _bf16_as_fp32(itp, arg), op))

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if z.dtype.scalar != itp.tl.bfloat16:
            return fma(self, x, y, z)
        return _narrow(itp, fma(self, *(_bf16_as_fp32(itp, h) for h in (x, y, z))))

    def create_clampf(self: Any, arg: Any, lo: Any, hi: Any, propagate_nans: Any) -> Any:
        if arg.dtype.scalar != itp.tl.bfloat16:
            return clampf(self, arg, lo, hi, propagate_nans)
        return _narrow(itp, clampf(self, *(_bf16_as_fp32(itp, h) for h in (arg, lo, hi)), propagate_nans))

    def get_bf16(self: Any, value: Any) -> Any:
        return itp.TensorHandle(_fp32_to_bf16_bits(np.array([value], dtype=np.float32)), itp.tl.bfloat16)

    # One rewrite (parse, transform, compile) at a time: CPython 3.11's compiler is not safe
    # for concurrent compile() of ASTs ("AST constructor recursion depth mismatch").
    rewrite = itp.InterpretedFunction.rewrite
    _saved["rewrite"] = rewrite
    rewrite_lock = threading.Lock()

    def rewrite_serialised(self: Any) -> Any:
        cached = itp.InterpretedFunction.rewritten_fn.get(self.fn)
        if cached is not None:
            return cached
        with rewrite_lock:
            return rewrite(self)

    itp.InterpretedFunction.rewrite = rewrite_serialised
    cls.binary_op, cls.unary_op, cls.create_fma, cls.create_clampf = binary_op, unary_op, create_fma, create_clampf
    _saved["get_bf16"] = cls.__dict__.get("get_bf16")
    cls.get_bf16 = get_bf16


def _bf16_as_fp32(itp: Any, h: Any) -> Any:
    if h.dtype.scalar != itp.tl.bfloat16:
        return h
    wide = (h.data.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return itp.TensorHandle(wide, itp.tl.float32)


def _fp32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def _narrow(itp: Any, h: Any) -> Any:
    """A float32 result back to bf16 (comparisons, whose data are booleans, stay as they are)."""
    if h.data.dtype != np.float32:
        return h
    return itp.TensorHandle(_fp32_to_bf16_bits(h.data), itp.tl.bfloat16)


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
    for name in ("binary_op", "unary_op", "create_fma", "create_clampf"):
        setattr(cls, name, _saved[name])
    itp.InterpretedFunction.rewrite = _saved["rewrite"]
    if _saved["get_bf16"] is None:
        del cls.get_bf16
    else:
        cls.get_bf16 = _saved["get_bf16"]
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
