"""The candidates of a key: the compute configurations the compiler says are worth timing at its shape
(``ovl candidates``: the tuned table's pick, the winners of the table's nearest measured shapes, the compute model's
best), each compiled into the kernel library as a key of its own. The runtime never ranks configurations itself.

Where a compiler is at hand (``$OVL_CLI`` or ``ovl`` on the PATH) one ``ovl candidates ... --out`` call compiles
every candidate at once; their folders are moved into the library under their keys' names and the list is kept as
``<library>/candidates/<key.dirname>.json``. A GPU machine without Node finds both on the search path when they were
prepared elsewhere (``python -m ovl_runtime kernels <op> ... --candidates 6 --into DIR``, then ``OVL_KERNELS=DIR``).
The table's pick is the key itself (no ``config``): if it wins, the operator bound is the one the torch API binds
without tuning. Pure Python: no torch.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._kernels.compute_config import CONFIG_OPERATORS, ComputeConfig
from .._kernels.library import KernelKey, KernelNotCompiled, cache_dir, compiler, find, search_path
from ..errors import UsageError
from .cache import locked
from .settings import TuneRefused

#: Schema id of ``ovl candidates --json``.
SCHEMA = "ovl.compute-candidates/v1"
#: Sources of the table's own pick (the first candidate): the table's entry, or the default tile where none fits.
TABLE_SOURCES = ("table", "default")


@dataclass(frozen=True)
class Candidate:
    """One configuration to time: the key that compiles it (the key itself for the table's pick), where it came from
    and what the compiler's model predicts for it (ms; None where it has no prediction)."""

    key: KernelKey
    config: ComputeConfig
    source: str
    predicted_ms: float | None


def candidates_file(root: Path, key: KernelKey) -> Path:
    """Where a library keeps the candidate list of ``key``."""
    return root / "candidates" / f"{key.dirname}.json"


def cli_args(key: KernelKey, top_k: int, out: Path) -> list[str]:
    """The ``ovl`` arguments that list (and compile into ``out``) the candidates of ``key``, flags as its own compile."""
    if key.op not in CONFIG_OPERATORS or key.config is not None:
        raise TuneRefused(f"{key.dirname}: candidates are listed for an untuned {' or '.join(CONFIG_OPERATORS)} key")
    return [
        "candidates",
        key.op,
        *("--m", str(key.m), "--n", str(key.n), "--k", str(key.k), "--world", str(key.world)),
        *("--split", str(key.split), "--backend", key.backend),
        *(["--target", key.target] if key.target else []),
        *(["--any-rows", "--max-rows", str(key.rows)] if key.rows else []),
        *("--top-k", str(top_k), "--out", str(out), "--json"),
    ]


def parse_candidates(data: Any, key: KernelKey, where: str) -> list[Candidate]:
    """The candidates of an ``ovl candidates --json`` document for ``key``, the table's pick first.
    @raises UsageError when it is not one, or is another key's."""
    if not isinstance(data, dict) or data.get("$schema") != SCHEMA:
        raise UsageError(f"{where}: not an {SCHEMA} document")
    prob = data.get("problem", {})
    got = (data.get("operator"), prob.get("M"), prob.get("N"), prob.get("K"), prob.get("world"))
    if got != (key.op, key.m, key.n, key.k, key.world) or (data.get("rows") or {}).get("max", 0) != key.rows:
        raise UsageError(f"{where}: lists the candidates of {got}, not of {key.dirname}")
    out: list[Candidate] = []
    for i, c in enumerate(data.get("candidates", [])):
        cfg = ComputeConfig.from_json(c.get("config"))
        source = str(c.get("source"))
        if (i == 0) != (source in TABLE_SOURCES):
            raise UsageError(f"{where}: candidate {i} comes from {source!r}; the table's pick comes first, and only it")
        pred = c.get("predictedMs")
        predicted = float(pred) if isinstance(pred, (int, float)) and pred == pred else None
        out.append(Candidate(key if i == 0 else replace(key, config=cfg), cfg, source, predicted))
    if not out:
        raise UsageError(f"{where}: lists no candidate")
    return out


def find_candidates(key: KernelKey, top_k: int) -> list[Candidate] | None:
    """The first ``top_k`` candidates of ``key`` kept on the search path (None where none are, or too few were
    listed and a compiler could list more)."""
    for d in search_path():
        p = candidates_file(d, key)
        if not p.is_file():
            continue
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"{p}: cannot be read as JSON ({exc}); delete it") from exc
        got = parse_candidates(data, key, str(p))
        if data.get("topK", 0) < top_k and compiler() is not None:
            return None
        return got[:top_k]
    return None


def prepare_candidates(key: KernelKey, top_k: int, into: Path | None = None, timeout_s: float | None = None) -> list[Candidate]:
    """The candidates of ``key``: kept ones (on the search path, or in ``into``), else listed and compiled by the
    compiler into ``into`` (default: the cache). One process at a time does it per library and key (a lock), so ranks
    of one node compile once. @raises KernelNotCompiled without a compiler; UsageError when the compiler fails."""
    root = into if into is not None else cache_dir()
    found = _kept(key, top_k, into)
    if found is not None:
        return found
    cmd = compiler()
    if cmd is None:
        raise KernelNotCompiled(
            f"no candidates of {key.dirname} on the search path ({', '.join(str(d) for d in search_path())}) and no compiler "
            "here (set OVL_CLI or put `ovl` on the PATH); on a machine with one: python -m ovl_runtime kernels "
            f"{key.op} ... --candidates {top_k} --into <dir>, then copy <dir> here and set OVL_KERNELS=<dir>"
        )
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / f".{key.dirname}.candidates"):
        found = _kept(key, top_k, into)  # another process listed them while this one waited
        if found is not None:
            return found
        tmp = Path(tempfile.mkdtemp(prefix=f".{key.dirname}.candidates.", dir=root))
        try:
            argv = [*cmd, *cli_args(key, top_k, tmp)]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout_s)
            except subprocess.TimeoutExpired as exc:
                raise TuneRefused(f"listing the candidates of {key.dirname} took over {timeout_s:.0f} s (the tuning budget)") from exc
            if proc.returncode != 0:
                raise UsageError(
                    f"listing the candidates of {key.dirname} failed ({shlex.join(cmd)} exited {proc.returncode}): {proc.stderr.strip()[-2000:]}"
                )
            data = json.loads(proc.stdout)
            listed = parse_candidates(data, key, "ovl candidates")
            for i, c in enumerate(listed):
                # Keep a copy already in the library (another process, or the untuned key compiled before).
                if find(c.key) is None and not (root / c.key.dirname).exists():
                    _move(tmp / f"c{i}", root / c.key.dirname)
            _write_json(candidates_file(root, key), data)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return listed


def _kept(key: KernelKey, top_k: int, into: Path | None) -> list[Candidate] | None:
    if into is None:
        return find_candidates(key, top_k)
    p = candidates_file(into, key)
    if not p.is_file():
        return None
    data = json.loads(p.read_text(encoding="utf-8"))
    return parse_candidates(data, key, str(p))[:top_k] if data.get("topK", 0) >= top_k else None


def _move(src: Path, dst: Path) -> None:
    """Rename a compiled folder into the library; one that appeared there meanwhile (another process) is kept."""
    try:
        os.replace(src, dst)
    except OSError:
        if not (dst / "manifest.json").is_file():
            raise


def _write_json(p: Path, data: Any) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".json", dir=p.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, p)
