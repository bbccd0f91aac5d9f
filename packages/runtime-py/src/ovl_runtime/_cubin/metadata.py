"""Ahead-of-time compiled kernels (cubin + metadata): the metadata and the launch plan.

TLX kernels are compiled by Meta's Triton fork, which is not installed on the GPU
machines; ``scripts/tlx-aot-compile.py`` of @ovl/tlx-emitter writes each kernel's cubin and
a metadata JSON (``ovl.cubin-metadata/v1``). This module parses that metadata and computes the
launch grid and cluster and the scalar arguments; :mod:`.driver` packs the arguments and loads and
launches the cubin. Pure: runs without a GPU.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RunnerError

METADATA_SCHEMA = "ovl.cubin-metadata/v1"
PACKS = ("ptr", "i32", "i64")
# CUDA driver enums used here (cuda.h, CUDA 12).
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
# Above this a kernel must opt in to dynamic shared memory.
DEFAULT_SHARED_LIMIT = 48 * 1024


class CubinError(RunnerError):
    """Metadata, arguments or a launch of a precompiled kernel that cannot work; ``path`` names the field."""

    code = "bad-cubin"

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


@dataclass(frozen=True)
class CubinArg:
    """One kernel parameter: its name, how it is packed (``ptr`` u64, ``i32``, ``i64``) and its manifest value."""

    name: str
    pack: str
    value: Mapping[str, Any]


@dataclass(frozen=True)
class HiddenArg:
    """A parameter Triton appends (global / profile scratch): a device buffer of ``bytes_per_program`` per program."""

    name: str
    bytes_per_program: int
    align: int


@dataclass(frozen=True)
class CubinMetadata:
    """What launching a precompiled kernel needs (``ovl.cubin-metadata/v1``)."""

    entry: str
    target: str
    shared: int
    num_warps: int
    threads_per_block: int
    cluster_dims: tuple[int, int, int]
    args: tuple[CubinArg, ...]
    hidden_args: tuple[HiddenArg, ...]
    #: Parameters compiled as multiples of 16 (pointers: 16-byte aligned addresses).
    aligned: tuple[str, ...] = ()


def _int(obj: Mapping[str, Any], key: str, where: str, minimum: int = 0) -> int:
    v = obj.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise CubinError(f"{where}.{key}", f"must be an integer >= {minimum}, got {v!r}")
    return v


def parse_metadata(obj: Any, where: str = "metadata") -> CubinMetadata:
    """Validate a metadata JSON object. @raises CubinError naming the first bad field."""
    if not isinstance(obj, dict):
        raise CubinError(where, "must be a JSON object")
    if obj.get("$schema") != METADATA_SCHEMA:
        raise CubinError(f"{where}.$schema", f"must be {METADATA_SCHEMA!r}, got {obj.get('$schema')!r}")
    entry = obj.get("entry")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise CubinError(f"{where}.entry", f"must be a kernel name, got {entry!r}")
    cluster = cluster_shape(obj.get("cluster_dims"))
    if cluster is None:
        raise CubinError(f"{where}.cluster_dims", f"must be three positive integers, got {obj.get('cluster_dims')!r}")
    args = []
    for i, a in enumerate(obj.get("args", [])):
        w = f"{where}.args[{i}]"
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or a.get("pack") not in PACKS:
            raise CubinError(w, f"must be {{name, pack in {PACKS}, value}}, got {a!r}")
        args.append(CubinArg(a["name"], a["pack"], a.get("value", {})))
    hidden = []
    for i, h in enumerate(obj.get("hidden_args", [])):
        w = f"{where}.hidden_args[{i}]"
        if not isinstance(h, dict) or h.get("pack") != "ptr" or not isinstance(h.get("name"), str):
            raise CubinError(w, f"must be a pointer parameter, got {h!r}")
        hidden.append(HiddenArg(h["name"], _int(h, "bytes_per_program", w), _int(h, "align", w, 1)))
    num_warps = _int(obj, "num_warps", where, 1)
    threads = _int(obj, "threads_per_block", where, 1)
    if threads != num_warps * 32:
        raise CubinError(f"{where}.threads_per_block", f"is {threads}, but {num_warps} warps are {num_warps * 32} threads")
    names = [a.name for a in args] + [h.name for h in hidden]
    if len(set(names)) != len(names):
        raise CubinError(f"{where}.args", f"parameter names repeat: {names}")
    aligned = obj.get("aligned", [])
    if not isinstance(aligned, list) or any(n not in names for n in aligned):
        raise CubinError(f"{where}.aligned", f"must list parameter names, got {aligned!r}")
    return CubinMetadata(
        entry=entry,
        target=str(obj.get("target", "")),
        shared=_int(obj, "shared", where),
        num_warps=num_warps,
        threads_per_block=threads,
        cluster_dims=cluster,
        args=tuple(args),
        hidden_args=tuple(hidden),
        aligned=tuple(aligned),
    )


def load_metadata(path: str | Path) -> CubinMetadata:
    """Read and validate a metadata file."""
    with open(path) as f:
        return parse_metadata(json.load(f), where=str(path))


def cluster_shape(value: Any) -> tuple[int, int, int] | None:
    """A cluster shape (a manifest's ``precompiled.cluster``, a cubin's ``cluster_dims``): three positive
    integers as a tuple, or None for anything else (booleans included)."""
    if not isinstance(value, list) or len(value) != 3:
        return None
    if any(not isinstance(c, int) or isinstance(c, bool) or c < 1 for c in value):
        return None
    return (value[0], value[1], value[2])


def launch_grid(grid: Sequence[Any], num_sms: int, cluster: tuple[int, int, int] = (1, 1, 1)) -> tuple[int, int, int]:
    """The manifest's grid (numbers or ``{kind: num-sms, cap, reserve}``) as three dims, rounded down to whole clusters.

    A persistent grid never exceeds the multiprocessors (every CTA must be resident: a
    producer waits on pushes of other CTAs). @raises CubinError for a grid that fits no cluster.
    """
    if not 1 <= len(grid) <= 3:
        raise CubinError("grid", f"must have 1 to 3 dims, got {len(grid)}")
    dims = []
    for i, g in enumerate(grid):
        if isinstance(g, dict) and g.get("kind") == "num-sms":
            cap, reserve = g.get("cap"), g.get("reserve", 0)
            d = max(1, num_sms - reserve) if isinstance(reserve, int) else num_sms
            d = min(d, cap) if isinstance(cap, int) else d
        elif isinstance(g, int) and not isinstance(g, bool) and g >= 1:
            d = g
        else:
            raise CubinError(f"grid[{i}]", f"must be a positive integer or {{kind: 'num-sms'}}, got {g!r}")
        dims.append(d)
    dims += [1] * (3 - len(dims))
    out = []
    for i, (d, c) in enumerate(zip(dims, cluster)):
        whole = (d // c) * c
        if whole < 1:
            raise CubinError(f"grid[{i}]", f"{d} programs cannot hold one cluster of {c}")
        out.append(whole)
    return (out[0], out[1], out[2])


def cap_clusters(grid: tuple[int, int, int], cluster: tuple[int, int, int], max_clusters: int) -> tuple[int, int, int]:
    """A one-dimensional persistent ``grid`` of ``cluster``-shaped clusters cut to ``max_clusters``
    whole clusters (what the GPU holds at once, ``CubinKernel.max_active_clusters``).
    @raises CubinError when not one cluster fits, or the grid or cluster is not one-dimensional."""
    if grid[1:] != (1, 1) or cluster[1:] != (1, 1):
        raise CubinError("grid", f"a persistent cluster grid is one-dimensional, got grid {list(grid)} and cluster {list(cluster)}")
    if max_clusters < 1:
        raise CubinError("cluster_dims", f"the GPU holds no cluster of {cluster[0]} CTAs of this kernel at once")
    return (min(grid[0], max_clusters * cluster[0]), 1, 1)


def scratch_bytes(meta: CubinMetadata, grid: tuple[int, int, int]) -> dict[str, int]:
    """Bytes of each hidden scratch buffer for a launch of ``grid`` (0: pass a null pointer)."""
    programs = grid[0] * grid[1] * grid[2]
    return {h.name: h.bytes_per_program * programs for h in meta.hidden_args}


def scalar_value(arg: CubinArg, rank: int, world: int, epoch: int, timeout_ns: int) -> int | None:
    """The integer a non-pointer manifest value resolves to on ``rank`` (``None`` for buffers and tables)."""
    kind = arg.value.get("kind")
    if kind == "int":
        return int(arg.value["value"])
    if kind == "rank":
        return rank
    if kind == "world":
        return world
    if kind == "epoch":
        return epoch
    if kind == "epoch-target":
        return epoch * int(arg.value["arrivals"])
    if kind == "timeout-ns":
        return timeout_ns
    return None
