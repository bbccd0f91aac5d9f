"""TLX kernels in a kernel library: when the torch API takes them, and how a library gets them.

The TLX backend's warp-specialised kernels (AllGather+GEMM, GEMM+ReduceScatter) are cubins compiled ahead of time
with Meta's Triton fork, which the GPU machines do not have: a shape's TLX directory (``<dirname>-tlx``, the
per-row-count key with ``tlx=True``) comes from a library prepared where fbtriton is installed
(:func:`prepare_tlx`, ``python -m ovl_runtime kernels … --tlx``), beside its ``backend.json``: what
``fastestBackend()`` (the CLI's tuned-table rule) takes at that shape. A call's key is the TLX one
(``library.tlx_key``, asked by ``call_key``) when such a directory is on the search path and

- ``OVL_TLX`` unset or ``auto``: its ``backend.json`` says the table measured TLX faster (``fastest: tlx``);
- ``OVL_TLX=1``: whatever its record says (every prepared TLX directory is taken);
- ``OVL_TLX=0``: never.

Otherwise the Triton key (compiled on demand as before). What a record holds and how ``OVL_TLX`` reads:
:mod:`.tlx_record`. Pure Python: no torch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import UsageError
from .library import KernelKey, compiler, no_compiler_reason
from .tlx_record import RECORD, RECORD_SCHEMA

_PACKAGES = Path(__file__).resolve().parents[4]
#: Where the AOT compile script and its venv live in a checkout of ovl (``@ovl/tlx-emitter``).
AOT_SCRIPT = _PACKAGES / "tlx-emitter" / "scripts" / "tlx-aot-compile.py"
TLX_VENV_PYTHON = _PACKAGES / "tlx-emitter" / ".venv-tlx" / "bin" / "python"


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
