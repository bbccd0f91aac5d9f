"""TileLink's index maps as the manifest carries them (``@ovl/mapping``'s JSON): evaluated here
exactly as the kernel source prints them, so the CPU emulation follows the same tile program.

A static map is an expression tree (``const``, ``var``, ``add``, ``mul``, ``min``, ``max``,
``floorDiv``, ``ceilDiv``, ``mod`` with Python's floor semantics); a dynamic map reads
``table[index]`` from this rank's row of the manifest table of that name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import KernelFault, ManifestError

_NARY: dict[str, Callable[[list[int]], int]] = {
    "add": sum,
    "mul": lambda xs: _product(xs),
    "min": min,
    "max": max,
}


def _product(xs: list[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _check(expr: Any, path: str) -> None:
    """Raise ManifestError unless ``expr`` is a well-formed expression tree."""
    if not isinstance(expr, dict) or "op" not in expr:
        raise ManifestError(path, f"expected an expression object with 'op', got {expr!r}")
    op = expr["op"]
    if op == "const":
        if not isinstance(expr.get("value"), int) or isinstance(expr.get("value"), bool):
            raise ManifestError(path, "a const needs an integer value")
    elif op == "var":
        if not isinstance(expr.get("name"), str):
            raise ManifestError(path, "a var needs a name")
    elif op in _NARY:
        args = expr.get("args")
        if not isinstance(args, list) or not args:
            raise ManifestError(path, f"{op} needs a non-empty args list")
        for i, a in enumerate(args):
            _check(a, f"{path}.args[{i}]")
    elif op in ("floorDiv", "ceilDiv", "mod"):
        _check(expr.get("dividend"), f"{path}.dividend")
        _check(expr.get("divisor"), f"{path}.divisor")
    else:
        raise ManifestError(path, f"unknown expression op {op!r}")


def evaluate(expr: Mapping[str, Any], env: Mapping[str, int]) -> int:
    """The value of an expression tree under ``env`` (Python's floor division and modulo)."""
    op = expr["op"]
    if op == "const":
        return int(expr["value"])
    if op == "var":
        name = expr["name"]
        if name not in env:
            raise KernelFault(f"index map reads variable {name!r}, which has no value (known: {', '.join(sorted(env))})")
        return env[name]
    if op in _NARY:
        return _NARY[op]([evaluate(a, env) for a in expr["args"]])
    a, b = evaluate(expr["dividend"], env), evaluate(expr["divisor"], env)
    if b == 0:
        raise KernelFault("index map divides by zero")
    if op == "floorDiv":
        return a // b
    if op == "ceilDiv":
        return -(-a // b)
    return a % b


@dataclass(frozen=True)
class IndexMap:
    """A checked index map: ``kind`` static (``expr``) or dynamic (``table`` name, ``length``, ``index``)."""

    kind: str
    expr: Mapping[str, Any] | None = None
    table: str | None = None
    length: int = 0
    index: Mapping[str, Any] | None = None

    def __call__(self, env: Mapping[str, int], tables: Mapping[str, Sequence[int] | np.ndarray]) -> int:
        if self.kind == "static":
            assert self.expr is not None
            return evaluate(self.expr, env)
        assert self.index is not None and self.table is not None
        i = evaluate(self.index, env)
        values = tables.get(self.table)
        if values is None:
            raise KernelFault(f"index map reads table {self.table!r}, which this rank does not have")
        if not 0 <= i < min(self.length, len(values)):
            raise KernelFault(f"index map reads {self.table}[{i}], outside [0, {min(self.length, len(values))})")
        return int(values[i])


def parse_index_map(v: Any, path: str) -> IndexMap:
    """An ``IndexMap`` from manifest JSON, checked; ManifestError names the first bad field."""
    if not isinstance(v, dict):
        raise ManifestError(path, f"expected an index map object, got {v!r}")
    kind = v.get("kind")
    if kind == "static":
        _check(v.get("expr"), f"{path}.expr")
        return IndexMap("static", expr=v["expr"])
    if kind == "dynamic":
        table = v.get("table")
        if not isinstance(table, dict) or not isinstance(table.get("name"), str) or not isinstance(table.get("length"), int):
            raise ManifestError(f"{path}.table", "a dynamic map needs a table with a name and a length")
        _check(v.get("index"), f"{path}.index")
        return IndexMap("dynamic", table=table["name"], length=table["length"], index=v["index"])
    raise ManifestError(f"{path}.kind", f"expected 'static' or 'dynamic', got {kind!r}")


@dataclass(frozen=True)
class TileProgram:
    """The tile program of a compiled local body: visit order and slot maps (see the manifest schema)."""

    role: str
    order: IndexMap
    slots: tuple[IndexMap, ...]
    num_pid_m: int
    num_pid_n: int
    # A consumer that reads its rows through an index table (ag-moe), see GatherRows.
    gather: GatherRows | None = None
    # A producer with gather (moe-rs): the rank whose signal buffer a segment's notifies go to (``ovl_seg``).
    owners: IndexMap | None = None


@dataclass(frozen=True)
class GatherRows:
    """Block m reads the rows ``e // divisor`` of the entries ``e = rows[m·block_rows + i]`` below
    ``limit`` and waits on the segments ``segment(first row)..segment(last row)`` (``ovl_row``)."""

    rows: str
    block_rows: int
    divisor: int
    limit: int
    row_count: int
    segment: IndexMap


def _parse_gather(v: Any, path: str) -> GatherRows:
    if not isinstance(v, dict) or not isinstance(v.get("rows"), str):
        raise ManifestError(path, "a gather needs rows (the index table's buffer), blockRows, divisor, limit, rowCount and segment")
    sizes = []
    for key in ("blockRows", "divisor", "limit", "rowCount"):
        d = v.get(key)
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise ManifestError(f"{path}.{key}", f"expected a positive integer, got {d!r}")
        sizes.append(d)
    block_rows, divisor, limit, row_count = sizes
    return GatherRows(v["rows"], block_rows, divisor, limit, row_count, segment=parse_index_map(v.get("segment"), f"{path}.segment"))


def parse_tile_program(v: Any, path: str) -> TileProgram:
    """A kernel's ``tileProgram`` from manifest JSON, checked."""
    if not isinstance(v, dict):
        raise ManifestError(path, f"expected an object, got {v!r}")
    role = v.get("role")
    if role not in ("consumer", "producer"):
        raise ManifestError(f"{path}.role", f"expected 'consumer' or 'producer', got {role!r}")
    slots = v.get("slots")
    if not isinstance(slots, list):
        raise ManifestError(f"{path}.slots", "expected a list of index maps")
    dims = []
    for key in ("numPidM", "numPidN"):
        d = v.get(key)
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise ManifestError(f"{path}.{key}", f"expected a positive integer, got {d!r}")
        dims.append(d)
    return TileProgram(
        role=role,
        order=parse_index_map(v.get("order"), f"{path}.order"),
        slots=tuple(parse_index_map(s, f"{path}.slots[{i}]") for i, s in enumerate(slots)),
        num_pid_m=dims[0],
        num_pid_n=dims[1],
        gather=None if v.get("gather") is None else _parse_gather(v["gather"], f"{path}.gather"),
        owners=_parse_owners(v, role, path),
    )


def _parse_owners(v: dict[str, Any], role: str, path: str) -> IndexMap | None:
    """``owners``: only a producer with ``gather`` notifies segments on their owners."""
    if v.get("owners") is None:
        return None
    if role != "producer" or v.get("gather") is None:
        raise ManifestError(f"{path}.owners", "only a producer with gather names its segments' owners")
    return parse_index_map(v["owners"], f"{path}.owners")
