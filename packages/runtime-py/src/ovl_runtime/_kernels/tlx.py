"""TLX kernels in a kernel library: when the torch API takes them, and how a library gets them.

The TLX backend's warp-specialised kernels (AllGather+GEMM, GEMM+ReduceScatter) are cubins compiled ahead of time
with Meta's Triton fork, which the GPU machines do not have: a shape's TLX directory (``<dirname>-tlx``, the
per-row-count key with ``tlx=True``) comes from a library prepared where fbtriton is installed
(:func:`prepare_tlx`, ``python -m ovl_runtime kernels … --tlx``), beside its ``backend.json``: what
``fastestBackend()`` (the CLI's tuned-table rule) takes at that shape. A call's key is the TLX one
(:func:`tlx_key`, asked by ``call_key``) when such a directory is on the search path and

- ``OVL_TLX`` unset or ``auto``: its ``backend.json`` says the table measured TLX faster (``fastest: tlx``);
- ``OVL_TLX=1``: whatever its record says (every prepared TLX directory is taken);
- ``OVL_TLX=0``: never.

Otherwise the Triton key (compiled on demand as before). Pure Python: no torch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .library import TLX_DTYPES, TLX_OPERATORS, KernelKey, compiler, find, no_compiler_reason

#: The environment variable that turns the TLX kernels off (``0``), on wherever prepared (``1``) or on where the
#: tuned table measured them faster (``auto``, the default).
TLX_ENV = "OVL_TLX"
#: The record a prepared TLX directory carries beside its manifest.
RECORD = "backend.json"
RECORD_SCHEMA = "ovl.tlx-backend/v1"
_PACKAGES = Path(__file__).resolve().parents[4]
#: Where the AOT compile script and its venv live in a checkout of ovl (``@ovl/tlx-emitter``).
AOT_SCRIPT = _PACKAGES / "tlx-emitter" / "scripts" / "tlx-aot-compile.py"
TLX_VENV_PYTHON = _PACKAGES / "tlx-emitter" / ".venv-tlx" / "bin" / "python"


def tlx_mode() -> str:
    """``off``, ``force`` or ``auto`` from ``$OVL_TLX`` (``0`` / ``1`` / unset or ``auto``)."""
    v = os.environ.get(TLX_ENV, "").strip().lower()
    if v in ("", "auto"):
        return "auto"
    if v == "0":
        return "off"
    if v == "1":
        return "force"
    raise UsageError(f"{TLX_ENV}={v!r}: use 0 (Triton kernels only), 1 (every prepared TLX kernel) or auto (the tuned table's pick)")


def read_record(directory: Path) -> dict[str, Any]:
    """The ``backend.json`` of a prepared TLX directory ({} when there is none or it does not parse)."""
    try:
        rec = json.loads((directory / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) and rec.get("$schema") == RECORD_SCHEMA else {}


def table_prefers_tlx(directory: Path) -> bool:
    """Whether the prepared directory's record says ``fastestBackend()`` takes TLX at its shape."""
    return read_record(directory).get("fastest") == "tlx"


def tlx_key(op: str, world: int, m: int, n: int, k: int, dtype: str = "bf16", target: str | None = None) -> KernelKey | None:
    """The TLX key of a call of ``op`` at these sizes when the torch API takes its TLX kernels (see the module
    docstring), else None."""
    mode = tlx_mode()
    if mode == "off" or op not in TLX_OPERATORS or dtype not in TLX_DTYPES:
        return None
    try:
        key = KernelKey(op, world, m, n, k, dtype, target=target, tlx=True)
    except UsageError:
        return None  # the Triton key's own checks name the problem
    path = find(key)
    if path is None:
        return None
    return key if mode == "force" or table_prefers_tlx(path.parent) else None


def prepare_tlx(key: KernelKey, into: Path, python: str | None = None, aot_script: Path | None = None) -> Path:
    """Compile ``key``'s TLX kernels into ``into/<key.dirname>`` (``key.tlx``): ``ovl emit … --tlx`` writes the
    TLX manifest, kernels and PTX expectations, then ``scripts/tlx-aot-compile.py`` of ``@ovl/tlx-emitter``, run by
    ``python`` (a Python with ``fbtriton``: ``$OVL_TLX_PYTHON``, else the emitter's ``.venv-tlx``), builds and
    checks the cubins; ``backend.json`` records which backend the tuned table takes there. Returns the manifest.
    @raises UsageError when a tool is missing or a step fails."""
    if not key.tlx:
        raise UsageError(f"{key.dirname}: prepare_tlx compiles TLX keys (tlx=True)")
    cmd = compiler()
    if cmd is None:
        raise UsageError(f"preparing TLX kernels needs ovl's compiler: {no_compiler_reason()}")
    py = python or os.environ.get("OVL_TLX_PYTHON") or (str(TLX_VENV_PYTHON) if TLX_VENV_PYTHON.exists() else None)
    if py is None:
        raise UsageError(
            "preparing TLX kernels needs a Python with fbtriton==3.7.4: set OVL_TLX_PYTHON, or run "
            "`pnpm --filter @ovl/tlx-emitter test:tlx` once (it makes packages/tlx-emitter/.venv-tlx)"
        )
    script = aot_script or Path(os.environ.get("OVL_TLX_AOT", str(AOT_SCRIPT)))
    if not script.is_file():
        raise UsageError(f"no TLX AOT compile script at {script} (set OVL_TLX_AOT to @ovl/tlx-emitter's scripts/tlx-aot-compile.py)")
    triton_key = KernelKey(key.op, key.world, key.m, key.n, key.k, key.dtype, target=key.target)
    into.mkdir(parents=True, exist_ok=True)
    final = into / key.dirname
    work = Path(tempfile.mkdtemp(prefix=f".{key.dirname}.", dir=into))
    try:
        emit = subprocess.run([*cmd, *triton_key.cli_args(work / "emit"), "--tlx", "--json"], capture_output=True, text=True, check=False)
        if emit.returncode != 0:
            raise UsageError(f"ovl emit --tlx for {key.dirname} failed: {emit.stderr.strip()[-2000:]}")
        out = json.loads(emit.stdout)
        tlx = out.get("tlx") if isinstance(out, dict) else None
        if not isinstance(tlx, dict) or not isinstance(tlx.get("manifest"), str):
            raise UsageError(f"ovl emit --tlx for {key.dirname} reported no TLX manifest")
        manifest = Path(tlx["manifest"])
        src = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)}
        aot = subprocess.run([py, str(script), str(manifest)], capture_output=True, text=True, check=False, env=env)
        if aot.returncode != 0:
            raise UsageError(f"the TLX AOT compile of {key.dirname} failed: {(aot.stdout + aot.stderr).strip()[-2000:]}")
        record = {
            "$schema": RECORD_SCHEMA,
            "backend": "tlx",
            "fastest": tlx.get("fastest") if tlx.get("fastest") in ("tlx", "triton") else "unknown",
            "measuredMs": tlx.get("measuredMs"),
            "target": key.target or "",
        }
        (manifest.parent / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(manifest.parent, final)
        print(f"ovl: {key.dirname}: {aot.stdout.strip().splitlines()[-1] if aot.stdout.strip() else 'compiled'}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final / "manifest.json"
