"""The interpreter engine's entry: whether it can run here, the process put in Triton's interpreter mode, and an
emitted kernel's ``@triton.jit`` entry imported (once per file) from its source in that mode."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

from .._manifest.types import KernelSpec
from ..errors import ManifestError, UsageError


def interpret_unavailable() -> str | None:
    """Why the interpreter engine cannot run here (torch or triton missing), or None."""
    missing = [p for p in ("torch", "triton") if importlib.util.find_spec(p) is None]
    if missing:
        return f"the interpreter emulation needs {' and '.join(missing)} (pip install 'ovl-runtime[interpret]': torch 2.11.0, triton 3.6.0)"
    return None


_load_lock = threading.Lock()
_modules: dict[Path, Any] = {}


def interpreter_mode() -> Any:
    """Put this process in Triton's interpreter mode and return ``ovl_runtime.language`` with
    the interpreter's definitions.

    Sets ``TRITON_INTERPRET=1`` for the process (it stays set): ``@triton.jit`` decides at
    decoration time, for Triton's own helpers (``tl.zeros``...) as for the kernels, so it must
    hold before ``triton.language`` is first imported. A process that imported Triton for
    the GPU already cannot switch: that is a ``UsageError`` (run the emulation in its own
    process, as ``python -m ovl_runtime run --emulate`` does).
    """
    os.environ["TRITON_INTERPRET"] = "1"
    std = sys.modules.get("triton.language.standard")
    if std is not None and type(getattr(std, "cdiv", None)).__name__ != "InterpretedFunction":
        raise UsageError(
            "triton was imported in this process without TRITON_INTERPRET=1; the interpreter emulation "
            "needs a process where it is set before triton is first imported"
        )
    import ovl_runtime.language as lang

    if not lang.INTERPRET:
        raise UsageError(
            "ovl_runtime.language was imported without TRITON_INTERPRET=1; the interpreter emulation "
            "needs a process where it is set before triton is first imported"
        )
    return lang


def load_interpreted_entry(k: KernelSpec, index: int) -> Any:
    """The kernel's ``@triton.jit`` entry, imported (once per file) from its source in interpreter mode."""
    if k.source_path is None:
        raise ManifestError(f"kernels[{index}].source", "kernel sources resolve against the manifest file; load it with load_manifest")
    interpreter_mode()
    path = k.source_path
    with _load_lock:
        mod = _modules.get(path)
        if mod is None:
            if str(path.parent) not in sys.path:  # kernels may import sibling files
                sys.path.append(str(path.parent))
            name = f"ovl_interpreted_{len(_modules)}_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ManifestError(f"kernels[{index}].source", f"cannot import {path}")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            try:
                spec.loader.exec_module(mod)
            except Exception as exc:  # noqa: BLE001 - a kernel that does not import
                raise ManifestError(
                    f"kernels[{index}].source", f"{path} does not import under the Triton interpreter: {type(exc).__name__}: {exc}"
                ) from exc
            _modules[path] = mod
    fn = getattr(mod, k.entry, None)
    if fn is None:
        raise ManifestError(f"kernels[{index}].entry", f"{path} defines no {k.entry!r}")
    if not hasattr(fn, "fn") or not hasattr(fn, "run"):
        raise ManifestError(f"kernels[{index}].entry", f"{k.entry} in {path} is not a @triton.jit function")
    return fn
