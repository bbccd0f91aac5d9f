"""The on-disk cache of tuned choices: per (operator, world, N, K, dtype, rows — M, or the range of an any-row-count
operator — target table and GPU name), the configuration the device measured fastest, with what it was measured
against, so the next process binds it at once.

The file is ``$OVL_CACHE_DIR/tuned.json`` (beside the compiled kernels) or ``$XDG_CACHE_HOME/ovl/tuned.json``
(``~/.cache/ovl/tuned.json``). Its contents are checked on every read: a file that is not JSON, has another
schema or holds a malformed entry is never trusted — a warning names it and the entry (or the whole file) is
ignored, so the shape is tuned again and the file rewritten. Writes hold an exclusive lock on ``tuned.json.lock``,
re-read the file and replace it atomically, so processes tuning at once (ranks of one node) keep every entry.
Pure Python: no torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._kernels.compute_config import ComputeConfig
from .._kernels.library import KernelKey
from ..errors import UsageError

#: Schema id of the cache file.
SCHEMA = "ovl.tuned/v1"


def cache_path() -> Path:
    """Where the cache lives: ``$OVL_CACHE_DIR/tuned.json`` or ``$XDG_CACHE_HOME/ovl/tuned.json``."""
    explicit = os.environ.get("OVL_CACHE_DIR")
    if explicit:
        return Path(explicit) / "tuned.json"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ovl" / "tuned.json"


def entry_key(key: KernelKey, gpu: str) -> str:
    """The cache key of ``key``'s shape on ``gpu``: everything its candidates and their times depend on. An
    any-row-count operator is one choice for its whole range (it is tuned at the M it describes)."""
    rows = f"rows<={key.rows}@{key.m}" if key.rows else f"m{key.m}"
    return f"{key.op}|w{key.world}|{rows}|n{key.n}|k{key.k}|{key.dtype}|table={key.target or 'default'}|gpu={gpu}"


@dataclass(frozen=True)
class CandidateTime:
    """One candidate as measured: its configuration, where it came from, its median (ms) or why it has none."""

    config: ComputeConfig
    source: str
    ms: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class TuneRecord:
    """What tuning chose for one shape on one GPU, and on what evidence.

    ``chosen``: the configuration bound; ``table``: the configuration the tuned table picks there (what the torch
    API binds without tuning); ``table_chosen``: whether they are one (the table's own compiled operator is bound);
    ``m``: the row count measured at; ``ms`` / ``table_ms`` / ``cublas_ms``: medians of the chosen configuration's,
    the table pick's (None where it did not run) and cuBLAS's GEMM there (each kernel alone, its waits satisfied,
    L2 flushed); ``seconds``: what tuning took;
    ``origin``: ``tuned`` in this process or ``cache``d by an earlier one."""

    entry: str
    dirname: str
    chosen: ComputeConfig
    table: ComputeConfig
    table_chosen: bool
    m: int
    ms: float
    table_ms: float | None
    cublas_ms: float
    seconds: float
    gpu: str
    when: str
    candidates: tuple[CandidateTime, ...] = ()
    reason: str = ""
    origin: str = field(default="tuned", compare=False)

    @property
    def ratio(self) -> float:
        """cuBLAS's time over the chosen configuration's: 1.0 is cuBLAS's speed."""
        return self.cublas_ms / self.ms

    @property
    def table_ratio(self) -> float | None:
        return None if self.table_ms is None else self.cublas_ms / self.table_ms

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("origin")
        out["chosen"], out["table"] = self.chosen.to_json(), self.table.to_json()
        out["candidates"] = [{**asdict(c), "config": c.config.to_json()} for c in self.candidates]
        return out

    @staticmethod
    def from_json(d: Any) -> TuneRecord:
        """A record as :meth:`to_json` wrote it. @raises UsageError (or TypeError/ValueError) for anything else."""
        if not isinstance(d, dict):
            raise UsageError("a record is an object")
        times = tuple(
            CandidateTime(ComputeConfig.from_json(c["config"]), str(c["source"]), _opt_ms(c.get("ms")), c.get("error"))
            for c in d.get("candidates", [])
        )
        rec = TuneRecord(
            entry=str(d["entry"]),
            dirname=str(d["dirname"]),
            chosen=ComputeConfig.from_json(d["chosen"]),
            table=ComputeConfig.from_json(d["table"]),
            table_chosen=bool(d["table_chosen"]),
            m=int(d["m"]),
            ms=_ms(d["ms"]),
            table_ms=_opt_ms(d["table_ms"]),
            cublas_ms=_ms(d["cublas_ms"]),
            seconds=float(d["seconds"]),
            gpu=str(d["gpu"]),
            when=str(d["when"]),
            candidates=times,
            reason=str(d.get("reason", "")),
            origin="cache",
        )
        if rec.table_chosen != (rec.chosen == rec.table):
            raise UsageError("table_chosen disagrees with the configurations")
        return rec


def _ms(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
        raise UsageError(f"a time must be a positive number of ms, got {v!r}")
    return float(v)


def _opt_ms(v: Any) -> float | None:
    return None if v is None else _ms(v)


def _warn(path: Path, what: str) -> None:
    warnings.warn(f"ovl tuning cache {path}: {what}; not trusted, the shape is tuned again", RuntimeWarning, stacklevel=3)


def read_cache(path: Path | None = None) -> dict[str, TuneRecord]:
    """Every valid entry of the cache file by its key (none when there is no file). A file or entry that does not
    check out is ignored with a ``RuntimeWarning``."""
    p = path or cache_path()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        _warn(p, f"cannot be read ({exc.strerror or exc})")
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        _warn(p, f"is not JSON ({exc.msg} at line {exc.lineno})")
        return {}
    if not isinstance(data, dict) or data.get("$schema") != SCHEMA or not isinstance(data.get("entries"), dict):
        _warn(p, f"is not an {SCHEMA} file")
        return {}
    out: dict[str, TuneRecord] = {}
    for k, v in data["entries"].items():
        try:
            rec = TuneRecord.from_json(v)
            if rec.entry != k:
                raise UsageError(f"is filed under {k!r} but names {rec.entry!r}")
        except (UsageError, KeyError, TypeError, ValueError) as exc:
            _warn(p, f"entry {k!r} is malformed ({exc})")
            continue
        out[k] = rec
    return out


@contextlib.contextmanager
def locked(p: Path) -> Iterator[None]:
    """An exclusive lock on ``<p>.lock`` (POSIX ``flock``; elsewhere none: the atomic replace still holds)."""
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(p.with_name(p.name + ".lock"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_record(rec: TuneRecord, path: Path | None = None) -> Path:
    """Add (or replace) ``rec`` in the cache file, keeping every other valid entry; returns the file's path."""
    p = path or cache_path()
    with locked(p):
        entries = {k: v.to_json() for k, v in read_cache(p).items()}
        entries[rec.entry] = rec.to_json()
        fd, tmp = tempfile.mkstemp(prefix=".tuned.", suffix=".json", dir=p.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"$schema": SCHEMA, "entries": entries}, f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return p
