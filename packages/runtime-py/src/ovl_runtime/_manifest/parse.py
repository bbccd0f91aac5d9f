"""The ``ovl.manifest/v1`` contract, read into typed dataclasses and validated.

Mirrors the emitter's zod schema (``@ovl/tlx-emitter`` ``manifest/schema.ts``) field for
field, then checks what a schema cannot: names that resolve, segments inside their buffers,
peer access only to symmetric buffers, tables of one row per rank. Errors name the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .._cubin.metadata import cluster_shape
from ..errors import ManifestError
from .checks import check_references
from .index_maps import parse_tile_program
from .types import (
    ARG_KINDS,
    BUFFER_DTYPES,
    FLOAT_DTYPES,
    MANIFEST_SCHEMA,
    OPERATORS,
    PRECOMPILED_TARGETS,
    BufferSpec,
    CommStream,
    CopyOp,
    GridDim,
    HostOp,
    KernelArg,
    KernelSpec,
    Manifest,
    NumSms,
    PrecompiledSpec,
    RankHostOps,
    ReferenceSpec,
    RoutingInit,
    Segment,
    SignalsSpec,
    SignalWrite,
    TableSpec,
    TimingSpec,
    WaitOp,
)

__all__ = [
    "MANIFEST_SCHEMA",
    "BufferSpec",
    "CommStream",
    "CopyOp",
    "GridDim",
    "HostOp",
    "KernelArg",
    "KernelSpec",
    "Manifest",
    "NumSms",
    "PrecompiledSpec",
    "RankHostOps",
    "ReferenceSpec",
    "Segment",
    "SignalWrite",
    "SignalsSpec",
    "TableSpec",
    "TimingSpec",
    "WaitOp",
    "checked_init",
    "load_manifest",
    "parse_manifest",
    "precompiled_files",
]


def checked_init(m: Manifest, buffer: str, init: str) -> str:
    """How a buffer is filled before a checked launch: the reference output is poisoned
    (an element no kernel writes fails the check), unless the operator works in place
    (the output is also an input)."""
    ref = m.reference
    if buffer == ref.output and buffer not in ref.inputs.values():
        return "poison"
    return init


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TEMPLATE_KIND = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_SOURCE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*\.py$")
_RELATIVE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


# ---- structural readers: each names the field it rejects ----


def _obj(v: Any, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ManifestError(path, f"expected an object, got {type(v).__name__}")
    return v


def _get(o: dict[str, Any], key: str, path: str) -> Any:
    if key not in o:
        raise ManifestError(f"{path}.{key}" if path else key, "is required")
    return o[key]


def _int(v: Any, path: str, minimum: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise ManifestError(path, f"expected an integer, got {v!r}")
    if minimum is not None and v < minimum:
        raise ManifestError(path, f"must be >= {minimum}, got {v}")
    return v


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise ManifestError(path, f"expected true or false, got {v!r}")
    return v


def _row_counts(value: object) -> tuple[int, ...] | None:
    """``reference.rowCounts``: positive row counts, one per rank (checked against the world
    and M by ``shards.check_row_shards``), or absent."""
    if value is None:
        return None
    if not isinstance(value, list) or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in value):
        raise ManifestError("reference.rowCounts", f"expected a list of positive row counts, one per rank, got {value!r}")
    return tuple(value)


def _ident(v: Any, path: str) -> str:
    if not isinstance(v, str) or not _IDENT.match(v):
        raise ManifestError(path, f"expected an identifier matching ^[A-Za-z_][A-Za-z0-9_]*$, got {v!r}")
    return v


def _enum(v: Any, allowed: tuple[Any, ...], path: str) -> Any:
    if v not in allowed:
        raise ManifestError(path, f"expected one of {', '.join(map(str, allowed))}, got {v!r}")
    return v


def _list(v: Any, path: str, min_len: int = 0) -> list[Any]:
    if not isinstance(v, list):
        raise ManifestError(path, f"expected an array, got {type(v).__name__}")
    if len(v) < min_len:
        raise ManifestError(path, f"needs at least {min_len} element(s)")
    return v


def _segment(v: Any, path: str) -> Segment:
    o = _obj(v, path)
    return Segment(
        buffer=_ident(_get(o, "buffer", path), f"{path}.buffer"),
        rank=_int(_get(o, "rank", path), f"{path}.rank", 0),
        offset=_int(_get(o, "offset", path), f"{path}.offset", 0),
        length=_int(_get(o, "length", path), f"{path}.length", 1),
    )


def _host_op(v: Any, path: str) -> HostOp:
    o = _obj(v, path)
    kind = _enum(_get(o, "kind", path), ("copy", "wait"), f"{path}.kind")
    if kind == "wait":
        rank = o.get("rank")
        return WaitOp(
            slot=_int(_get(o, "slot", path), f"{path}.slot", 0),
            arrivals=_int(_get(o, "arrivals", path), f"{path}.arrivals", 1),
            rank=None if rank is None else _int(rank, f"{path}.rank", 0),
        )
    sig = None
    if o.get("signal") is not None:
        so = _obj(o["signal"], f"{path}.signal")
        sig = SignalWrite(
            rank=_int(_get(so, "rank", f"{path}.signal"), f"{path}.signal.rank", 0),
            slot=_int(_get(so, "slot", f"{path}.signal"), f"{path}.signal.slot", 0),
        )
    return CopyOp(src=_segment(_get(o, "src", path), f"{path}.src"), dst=_segment(_get(o, "dst", path), f"{path}.dst"), signal=sig)


def _kernel_arg(v: Any, path: str) -> KernelArg:
    o = _obj(v, path)
    kind = _enum(_get(o, "kind", path), ARG_KINDS, f"{path}.kind")
    if kind in ("buffer", "table"):
        return KernelArg(kind, name=_ident(_get(o, "name", path), f"{path}.name"))
    if kind == "peer-pointers":
        return KernelArg(kind, buffer=_ident(_get(o, "buffer", path), f"{path}.buffer"))
    if kind == "int":
        return KernelArg(kind, value=_int(_get(o, "value", path), f"{path}.value"))
    if kind == "epoch-target":
        return KernelArg(kind, arrivals=_int(_get(o, "arrivals", path), f"{path}.arrivals", 1))
    return KernelArg(kind)


def _grid_dim(v: Any, path: str) -> GridDim:
    if isinstance(v, dict):
        _enum(_get(v, "kind", path), ("num-sms",), f"{path}.kind")
        cap = v.get("cap")
        reserve = v.get("reserve")
        return NumSms(None if cap is None else _int(cap, f"{path}.cap", 1), 0 if reserve is None else _int(reserve, f"{path}.reserve", 0))
    return _int(v, path, 1)


def _scalar_record(v: Any, path: str, allow_str: bool) -> dict[str, Any]:
    o = _obj(v, path)
    for k, x in o.items():
        _ident(k, f"{path} key")
        ok = isinstance(x, (bool, int, float)) or (allow_str and isinstance(x, str))
        if not ok:
            raise ManifestError(f"{path}.{k}", f"expected a number{', string' if allow_str else ''} or boolean, got {x!r}")
    return dict(o)


def _template_kind(v: Any, path: str) -> str:
    # Kinds are spelled with hyphens (`ag-gemm-consumer`); an identifier spelling
    # (`ag_gemm_consumer`) names the same template.
    if not isinstance(v, str) or not _TEMPLATE_KIND.match(v):
        raise ManifestError(path, f"expected a template kind such as 'ag-gemm-consumer', got {v!r}")
    return v.replace("_", "-")


def _relative_file(v: Any, suffix: str, path: str) -> str:
    if not isinstance(v, str) or not _RELATIVE.match(v) or ".." in v or not v.endswith(suffix):
        raise ManifestError(path, f"expected a relative {suffix} path without '..', got {v!r}")
    return v


def _precompiled(v: Any, path: str, base_dir: Path | None) -> PrecompiledSpec:
    o = _obj(v, path)
    cubin = _relative_file(_get(o, "cubin", path), ".cubin", f"{path}.cubin")
    metadata = _relative_file(_get(o, "metadata", path), ".json", f"{path}.metadata")
    raw_cluster = o.get("cluster")
    cluster = None if raw_cluster is None else cluster_shape(raw_cluster)
    if raw_cluster is not None and cluster is None:
        raise ManifestError(f"{path}.cluster", f"expected three positive integers, got {raw_cluster!r}")
    return PrecompiledSpec(
        target=_enum(_get(o, "target", path), PRECOMPILED_TARGETS, f"{path}.target"),
        cubin=cubin,
        metadata=metadata,
        cubin_path=None if base_dir is None else (base_dir / cubin).resolve(),
        metadata_path=None if base_dir is None else (base_dir / metadata).resolve(),
        cluster=cluster,
    )


def precompiled_files(k: KernelSpec, index: int) -> tuple[Path, Path]:
    """The cubin and metadata files of a precompiled kernel, checked to exist (a GPU run needs
    them; the CPU emulation does not). @raises ManifestError naming the field to fix."""
    p = k.precompiled
    where = f"kernels[{index}].precompiled"
    if p is None:
        raise ManifestError(where, f"kernel {k.name} has no precompiled cubin")
    if p.cubin_path is None or p.metadata_path is None:
        raise ManifestError(where, "precompiled paths resolve against the manifest file; load it with load_manifest")
    for field_name, f in (("cubin", p.cubin_path), ("metadata", p.metadata_path)):
        if not f.is_file():
            raise ManifestError(
                f"{where}.{field_name}",
                f"{f} does not exist (paths are relative to the manifest; run the AOT compile, scripts/tlx-aot-compile.py of @ovl/tlx-emitter)",
            )
    return p.cubin_path, p.metadata_path


def _kernel(v: Any, path: str, base_dir: Path | None) -> KernelSpec:
    o = _obj(v, path)
    source = _get(o, "source", path)
    if not isinstance(source, str) or not _SOURCE.match(source) or ".." in source:
        raise ManifestError(f"{path}.source", f"expected a relative .py path without '..', got {source!r}")
    source_path = None
    if base_dir is not None:
        source_path = (base_dir / source).resolve()
        if not source_path.is_file():
            raise ManifestError(f"{path}.source", f"kernel source {source_path} does not exist (paths are relative to the manifest)")
    args = []
    for i, a in enumerate(_list(_get(o, "args", path), f"{path}.args")):
        ao = _obj(a, f"{path}.args[{i}]")
        args.append(
            (
                _ident(_get(ao, "name", f"{path}.args[{i}]"), f"{path}.args[{i}].name"),
                _kernel_arg(_get(ao, "value", f"{path}.args[{i}]"), f"{path}.args[{i}].value"),
            )
        )
    names = [n for n, _ in args]
    if len(set(names)) != len(names):
        raise ManifestError(f"{path}.args", "argument names must be unique")
    tpl = _obj(_get(o, "template", path), f"{path}.template")
    return KernelSpec(
        name=_ident(_get(o, "name", path), f"{path}.name"),
        source=source,
        entry=_ident(_get(o, "entry", path), f"{path}.entry"),
        stream=_enum(_get(o, "stream", path), ("compute", "comm"), f"{path}.stream"),
        grid=tuple(_grid_dim(g, f"{path}.grid[{i}]") for i, g in enumerate(_list(_get(o, "grid", path), f"{path}.grid", 1))),
        num_warps=_int(_get(o, "numWarps", path), f"{path}.numWarps", 1),
        num_stages=_int(_get(o, "numStages", path), f"{path}.numStages", 1),
        args=tuple(args),
        constexprs=_scalar_record(_get(o, "constexprs", path), f"{path}.constexprs", False),
        template_kind=_template_kind(_get(tpl, "kind", f"{path}.template"), f"{path}.template.kind"),
        template_params=_scalar_record(_get(tpl, "params", f"{path}.template"), f"{path}.template.params", True),
        source_path=source_path,
        precompiled=None if o.get("precompiled") is None else _precompiled(o["precompiled"], f"{path}.precompiled", base_dir),
        tile_program=None if o.get("tileProgram") is None else parse_tile_program(o["tileProgram"], f"{path}.tileProgram"),
    )


def _routing(v: Any, path: str) -> RoutingInit:
    o = _obj(v, path)
    choices = o.get("choices")
    return RoutingInit(
        experts=_int(_get(o, "experts", path), f"{path}.experts", 1),
        choices=None
        if choices is None
        else tuple(_int(c, f"{path}.choices[{i}]", 0) for i, c in enumerate(_list(choices, f"{path}.choices", 1))),
    )


def parse_manifest(data: Any, base_dir: Path | None = None) -> Manifest:
    """Read and validate a manifest from parsed JSON.

    ``base_dir`` is the manifest's folder: kernel sources resolve against it and must
    exist. Without it (a manifest built in memory) sources are not looked up.
    Raises ManifestError naming the first field that is wrong.
    """
    o = _obj(data, "manifest")
    tag = o.get("$schema")
    if tag != MANIFEST_SCHEMA:
        raise ManifestError("$schema", f"expected {MANIFEST_SCHEMA!r}, got {tag!r}")
    world = _int(_get(o, "world", ""), "world", 1)
    buffers = []
    for i, b in enumerate(_list(_get(o, "buffers", ""), "buffers", 1)):
        p = f"buffers[{i}]"
        bo = _obj(b, p)
        buffers.append(
            BufferSpec(
                name=_ident(_get(bo, "name", p), f"{p}.name"),
                shape=tuple(_int(x, f"{p}.shape[{j}]", 1) for j, x in enumerate(_list(_get(bo, "shape", p), f"{p}.shape", 1))),
                dtype=_enum(_get(bo, "dtype", p), BUFFER_DTYPES, f"{p}.dtype"),
                symmetric=_bool(_get(bo, "symmetric", p), f"{p}.symmetric"),
                init=_enum(_get(bo, "init", p), ("random", "zeros", "poison", "keep", "routing", "replicated"), f"{p}.init"),
                routing=None if bo.get("routing") is None else _routing(bo["routing"], f"{p}.routing"),
            )
        )
    so = _obj(_get(o, "signals", ""), "signals")
    signals = SignalsSpec(
        buffer=_ident(_get(so, "buffer", "signals"), "signals.buffer"),
        slots=_int(_get(so, "slots", "signals"), "signals.slots", 1),
        bits=_enum(_get(so, "bits", "signals"), (32, 64), "signals.bits"),
    )
    tables = []
    for i, t in enumerate(_list(_get(o, "tables", ""), "tables")):
        p = f"tables[{i}]"
        to = _obj(t, p)
        rows = _list(_get(to, "values", p), f"{p}.values", 1)
        values = tuple(
            tuple(_int(x, f"{p}.values[{r}][{j}]") for j, x in enumerate(_list(row, f"{p}.values[{r}]"))) for r, row in enumerate(rows)
        )
        tables.append(
            TableSpec(
                name=_ident(_get(to, "name", p), f"{p}.name"),
                dtype=_enum(_get(to, "dtype", p), ("int32", "int64"), f"{p}.dtype"),
                values=values,
            )
        )
    kernels = tuple(_kernel(k, f"kernels[{i}]", base_dir) for i, k in enumerate(_list(_get(o, "kernels", ""), "kernels", 1)))
    host_ops = []
    for i, h in enumerate(_list(_get(o, "hostOps", ""), "hostOps")):
        p = f"hostOps[{i}]"
        ho = _obj(h, p)
        streams = []
        for j, s in enumerate(_list(_get(ho, "streams", p), f"{p}.streams")):
            sp = f"{p}.streams[{j}]"
            sto = _obj(s, sp)
            ops = tuple(_host_op(x, f"{sp}.ops[{k}]") for k, x in enumerate(_list(_get(sto, "ops", sp), f"{sp}.ops")))
            streams.append(CommStream(name=_ident(_get(sto, "name", sp), f"{sp}.name"), ops=ops))
        host_ops.append(RankHostOps(rank=_int(_get(ho, "rank", p), f"{p}.rank", 0), streams=tuple(streams)))
    ro = _obj(_get(o, "reference", ""), "reference")
    inputs = _obj(_get(ro, "inputs", "reference"), "reference.inputs")
    rpr = ro.get("rowsPerRank")
    tol = _get(ro, "tolerance", "reference")
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0:
        raise ManifestError("reference.tolerance", f"expected a positive number, got {tol!r}")
    reference = ReferenceSpec(
        operator=_enum(_get(ro, "operator", "reference"), OPERATORS, "reference.operator"),
        M=_int(_get(ro, "M", "reference"), "reference.M", 1),
        N=_int(_get(ro, "N", "reference"), "reference.N", 1),
        K=_int(_get(ro, "K", "reference"), "reference.K", 1),
        inputs={_ident(k, "reference.inputs key"): _ident(v, f"reference.inputs.{k}") for k, v in inputs.items()},
        output=_ident(_get(ro, "output", "reference"), "reference.output"),
        rows_per_rank=None if rpr is None else _int(rpr, "reference.rowsPerRank", 1),
        tolerance=float(tol),
        group_table=None if ro.get("groupTable") is None else _ident(ro["groupTable"], "reference.groupTable"),
        row_counts=_row_counts(ro.get("rowCounts")),
    )
    tmo = _obj(_get(o, "timing", ""), "timing")
    timing = TimingSpec(
        warmup=_int(_get(tmo, "warmup", "timing"), "timing.warmup", 0),
        reps=_int(_get(tmo, "reps", "timing"), "timing.reps", 1),
        check_runs=_int(_get(tmo, "checkRuns", "timing"), "timing.checkRuns", 1),
    )
    m = Manifest(
        name=_ident(_get(o, "name", ""), "name"),
        world=world,
        dtype=_enum(_get(o, "dtype", ""), FLOAT_DTYPES, "dtype"),
        buffers=tuple(buffers),
        signals=signals,
        tables=tuple(tables),
        kernels=kernels,
        host_ops=tuple(host_ops),
        reference=reference,
        timing=timing,
        wait_timeout_ns=_int(_get(o, "waitTimeoutNs", ""), "waitTimeoutNs", 1),
        base_dir=base_dir,
        raw=o,
    )
    check_references(m)
    return m


def load_manifest(path: str | Path) -> Manifest:
    """Load a manifest JSON file; kernel sources resolve relative to its folder."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError("", f"cannot read manifest {p}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError("", f"{p} is not JSON: {exc}") from exc
    from .schema import check_manifest_schema

    check_manifest_schema(data)
    return parse_manifest(data, p.resolve().parent)
