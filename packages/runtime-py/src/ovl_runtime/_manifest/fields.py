"""The structural readers of a manifest's JSON: each checks one field's shape and names the field it rejects."""

from __future__ import annotations

import re
from typing import Any

from ..errors import ManifestError

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TEMPLATE_KIND = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
SOURCE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*\.py$")
RELATIVE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


def obj(v: Any, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ManifestError(path, f"expected an object, got {type(v).__name__}")
    return v


def get(o: dict[str, Any], key: str, path: str) -> Any:
    if key not in o:
        raise ManifestError(f"{path}.{key}" if path else key, "is required")
    return o[key]


def int_(v: Any, path: str, minimum: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise ManifestError(path, f"expected an integer, got {v!r}")
    if minimum is not None and v < minimum:
        raise ManifestError(path, f"must be >= {minimum}, got {v}")
    return v


def bool_(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise ManifestError(path, f"expected true or false, got {v!r}")
    return v


def row_counts(value: object) -> tuple[int, ...] | None:
    """``reference.rowCounts``: positive row counts, one per rank (checked against the world
    and M by ``_manifest.shards.check_row_shards``), or absent."""
    if value is None:
        return None
    if not isinstance(value, list) or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in value):
        raise ManifestError("reference.rowCounts", f"expected a list of positive row counts, one per rank, got {value!r}")
    return tuple(value)


def ident(v: Any, path: str) -> str:
    if not isinstance(v, str) or not IDENT.match(v):
        raise ManifestError(path, f"expected an identifier matching ^[A-Za-z_][A-Za-z0-9_]*$, got {v!r}")
    return v


def enum(v: Any, allowed: tuple[Any, ...], path: str) -> Any:
    if v not in allowed:
        raise ManifestError(path, f"expected one of {', '.join(map(str, allowed))}, got {v!r}")
    return v


def list_(v: Any, path: str, min_len: int = 0) -> list[Any]:
    if not isinstance(v, list):
        raise ManifestError(path, f"expected an array, got {type(v).__name__}")
    if len(v) < min_len:
        raise ManifestError(path, f"needs at least {min_len} element(s)")
    return v
