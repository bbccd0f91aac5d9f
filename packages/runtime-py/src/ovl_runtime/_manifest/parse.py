"""The ``ovl.manifest/v1`` contract, read into typed dataclasses and validated.

Mirrors the emitter's zod schema (``@ovl/tlx-emitter`` ``manifest/schema.ts``) field for
field, then checks what a schema cannot: names that resolve, segments inside their buffers,
peer access only to symmetric buffers, tables of one row per rank. Errors name the field.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._cubin.metadata import cluster_shape
from ..errors import ManifestError
from .checks import check_references
from .fields import RELATIVE, SOURCE, TEMPLATE_KIND, bool_, enum, get, ident, int_, list_, obj, row_counts
from .index_maps import parse_tile_program
from .rows import instantiate_data, rows_args
from .types import (
    ARG_KINDS,
    BUFFER_DTYPES,
    FLOAT_DTYPES,
    KERNEL_REQUIREMENTS,
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
    RowsSpec,
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
    "load_manifest",
    "parse_manifest",
    "precompiled_files",
]


def _segment(v: Any, path: str) -> Segment:
    o = obj(v, path)
    return Segment(
        buffer=ident(get(o, "buffer", path), f"{path}.buffer"),
        rank=int_(get(o, "rank", path), f"{path}.rank", 0),
        offset=int_(get(o, "offset", path), f"{path}.offset", 0),
        length=int_(get(o, "length", path), f"{path}.length", 1),
    )


def _host_op(v: Any, path: str) -> HostOp:
    o = obj(v, path)
    kind = enum(get(o, "kind", path), ("copy", "wait"), f"{path}.kind")
    if kind == "wait":
        rank = o.get("rank")
        return WaitOp(
            slot=int_(get(o, "slot", path), f"{path}.slot", 0),
            arrivals=int_(get(o, "arrivals", path), f"{path}.arrivals", 1),
            rank=None if rank is None else int_(rank, f"{path}.rank", 0),
        )
    sig = None
    if o.get("signal") is not None:
        so = obj(o["signal"], f"{path}.signal")
        sig = SignalWrite(
            rank=int_(get(so, "rank", f"{path}.signal"), f"{path}.signal.rank", 0),
            slot=int_(get(so, "slot", f"{path}.signal"), f"{path}.signal.slot", 0),
        )
    return CopyOp(src=_segment(get(o, "src", path), f"{path}.src"), dst=_segment(get(o, "dst", path), f"{path}.dst"), signal=sig)


def _kernel_arg(v: Any, path: str) -> KernelArg:
    o = obj(v, path)
    kind = enum(get(o, "kind", path), ARG_KINDS, f"{path}.kind")
    if kind in ("buffer", "table"):
        return KernelArg(kind, name=ident(get(o, "name", path), f"{path}.name"))
    if kind == "peer-pointers":
        return KernelArg(kind, buffer=ident(get(o, "buffer", path), f"{path}.buffer"))
    if kind == "int":
        return KernelArg(kind, value=int_(get(o, "value", path), f"{path}.value"))
    if kind == "epoch-target":
        return KernelArg(kind, arrivals=int_(get(o, "arrivals", path), f"{path}.arrivals", 1))
    return KernelArg(kind)


def _grid_dim(v: Any, path: str) -> GridDim:
    if isinstance(v, dict):
        enum(get(v, "kind", path), ("num-sms",), f"{path}.kind")
        cap = v.get("cap")
        reserve = v.get("reserve")
        return NumSms(None if cap is None else int_(cap, f"{path}.cap", 1), 0 if reserve is None else int_(reserve, f"{path}.reserve", 0))
    return int_(v, path, 1)


def _scalar_record(v: Any, path: str, allow_str: bool) -> dict[str, Any]:
    o = obj(v, path)
    for k, x in o.items():
        ident(k, f"{path} key")
        ok = isinstance(x, (bool, int, float)) or (allow_str and isinstance(x, str))
        if not ok:
            raise ManifestError(f"{path}.{k}", f"expected a number{', string' if allow_str else ''} or boolean, got {x!r}")
    return dict(o)


def _template_kind(v: Any, path: str) -> str:
    # Kinds are spelled with hyphens (`ag-gemm-consumer`); an identifier spelling
    # (`ag_gemm_consumer`) names the same template.
    if not isinstance(v, str) or not TEMPLATE_KIND.match(v):
        raise ManifestError(path, f"expected a template kind such as 'ag-gemm-consumer', got {v!r}")
    return v.replace("_", "-")


def _relative_file(v: Any, suffix: str, path: str) -> str:
    if not isinstance(v, str) or not RELATIVE.match(v) or ".." in v or not v.endswith(suffix):
        raise ManifestError(path, f"expected a relative {suffix} path without '..', got {v!r}")
    return v


def _precompiled(v: Any, path: str, base_dir: Path | None) -> PrecompiledSpec:
    o = obj(v, path)
    cubin = _relative_file(get(o, "cubin", path), ".cubin", f"{path}.cubin")
    metadata = _relative_file(get(o, "metadata", path), ".json", f"{path}.metadata")
    raw_cluster = o.get("cluster")
    cluster = None if raw_cluster is None else cluster_shape(raw_cluster)
    if raw_cluster is not None and cluster is None:
        raise ManifestError(f"{path}.cluster", f"expected three positive integers, got {raw_cluster!r}")
    return PrecompiledSpec(
        target=enum(get(o, "target", path), PRECOMPILED_TARGETS, f"{path}.target"),
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
    o = obj(v, path)
    source = get(o, "source", path)
    if not isinstance(source, str) or not SOURCE.match(source) or ".." in source:
        raise ManifestError(f"{path}.source", f"expected a relative .py path without '..', got {source!r}")
    source_path = None
    if base_dir is not None:
        source_path = (base_dir / source).resolve()
        if not source_path.is_file():
            raise ManifestError(f"{path}.source", f"kernel source {source_path} does not exist (paths are relative to the manifest)")
    args = []
    for i, a in enumerate(list_(get(o, "args", path), f"{path}.args")):
        ao = obj(a, f"{path}.args[{i}]")
        args.append(
            (
                ident(get(ao, "name", f"{path}.args[{i}]"), f"{path}.args[{i}].name"),
                _kernel_arg(get(ao, "value", f"{path}.args[{i}]"), f"{path}.args[{i}].value"),
            )
        )
    names = [n for n, _ in args]
    if len(set(names)) != len(names):
        raise ManifestError(f"{path}.args", "argument names must be unique")
    tpl = obj(get(o, "template", path), f"{path}.template")
    return KernelSpec(
        name=ident(get(o, "name", path), f"{path}.name"),
        source=source,
        entry=ident(get(o, "entry", path), f"{path}.entry"),
        stream=enum(get(o, "stream", path), ("compute", "comm"), f"{path}.stream"),
        grid=tuple(_grid_dim(g, f"{path}.grid[{i}]") for i, g in enumerate(list_(get(o, "grid", path), f"{path}.grid", 1))),
        num_warps=int_(get(o, "numWarps", path), f"{path}.numWarps", 1),
        num_stages=int_(get(o, "numStages", path), f"{path}.numStages", 1),
        args=tuple(args),
        constexprs=_scalar_record(get(o, "constexprs", path), f"{path}.constexprs", False),
        template_kind=_template_kind(get(tpl, "kind", f"{path}.template"), f"{path}.template.kind"),
        template_params=_scalar_record(get(tpl, "params", f"{path}.template"), f"{path}.template.params", True),
        source_path=source_path,
        precompiled=None if o.get("precompiled") is None else _precompiled(o["precompiled"], f"{path}.precompiled", base_dir),
        tile_program=None if o.get("tileProgram") is None else parse_tile_program(o["tileProgram"], f"{path}.tileProgram"),
        requires=_requires(o.get("requires"), f"{path}.requires"),
    )


def _requires(v: Any, path: str) -> tuple[str, ...]:
    """``kernels[i].requires``: what the runner must provide (``nvshmem``), at least one, each once."""
    if v is None:
        return ()
    items = tuple(enum(x, KERNEL_REQUIREMENTS, f"{path}[{i}]") for i, x in enumerate(list_(v, path, 1)))
    if len(set(items)) != len(items):
        raise ManifestError(path, "names a requirement twice")
    return items


def _routing(v: Any, path: str) -> RoutingInit:
    o = obj(v, path)
    choices = o.get("choices")
    return RoutingInit(
        experts=int_(get(o, "experts", path), f"{path}.experts", 1),
        choices=None
        if choices is None
        else tuple(int_(c, f"{path}.choices[{i}]", 0) for i, c in enumerate(list_(choices, f"{path}.choices", 1))),
    )


def parse_manifest(data: Any, base_dir: Path | None = None) -> Manifest:
    """Read and validate a manifest from parsed JSON.

    ``base_dir`` is the manifest's folder: kernel sources resolve against it and must
    exist. Without it (a manifest built in memory) sources are not looked up.
    Raises ManifestError naming the first field that is wrong.
    """
    o = obj(data, "manifest")
    tag = o.get("$schema")
    if tag != MANIFEST_SCHEMA:
        raise ManifestError("$schema", f"expected {MANIFEST_SCHEMA!r}, got {tag!r}")
    world = int_(get(o, "world", ""), "world", 1)
    buffers = []
    for i, b in enumerate(list_(get(o, "buffers", ""), "buffers", 1)):
        p = f"buffers[{i}]"
        bo = obj(b, p)
        buffers.append(
            BufferSpec(
                name=ident(get(bo, "name", p), f"{p}.name"),
                shape=tuple(int_(x, f"{p}.shape[{j}]", 1) for j, x in enumerate(list_(get(bo, "shape", p), f"{p}.shape", 1))),
                dtype=enum(get(bo, "dtype", p), BUFFER_DTYPES, f"{p}.dtype"),
                symmetric=bool_(get(bo, "symmetric", p), f"{p}.symmetric"),
                init=enum(get(bo, "init", p), ("random", "zeros", "poison", "keep", "routing", "replicated"), f"{p}.init"),
                routing=None if bo.get("routing") is None else _routing(bo["routing"], f"{p}.routing"),
            )
        )
    so = obj(get(o, "signals", ""), "signals")
    signals = SignalsSpec(
        buffer=ident(get(so, "buffer", "signals"), "signals.buffer"),
        slots=int_(get(so, "slots", "signals"), "signals.slots", 1),
        bits=enum(get(so, "bits", "signals"), (32, 64), "signals.bits"),
    )
    tables = []
    for i, t in enumerate(list_(get(o, "tables", ""), "tables")):
        p = f"tables[{i}]"
        to = obj(t, p)
        rows = list_(get(to, "values", p), f"{p}.values", 1)
        values = tuple(
            tuple(int_(x, f"{p}.values[{r}][{j}]") for j, x in enumerate(list_(row, f"{p}.values[{r}]"))) for r, row in enumerate(rows)
        )
        tables.append(
            TableSpec(
                name=ident(get(to, "name", p), f"{p}.name"),
                dtype=enum(get(to, "dtype", p), ("int32", "int64"), f"{p}.dtype"),
                values=values,
            )
        )
    kernels = tuple(_kernel(k, f"kernels[{i}]", base_dir) for i, k in enumerate(list_(get(o, "kernels", ""), "kernels", 1)))
    host_ops = []
    for i, h in enumerate(list_(get(o, "hostOps", ""), "hostOps")):
        p = f"hostOps[{i}]"
        ho = obj(h, p)
        streams = []
        for j, s in enumerate(list_(get(ho, "streams", p), f"{p}.streams")):
            sp = f"{p}.streams[{j}]"
            sto = obj(s, sp)
            ops = tuple(_host_op(x, f"{sp}.ops[{k}]") for k, x in enumerate(list_(get(sto, "ops", sp), f"{sp}.ops")))
            streams.append(CommStream(name=ident(get(sto, "name", sp), f"{sp}.name"), ops=ops))
        host_ops.append(RankHostOps(rank=int_(get(ho, "rank", p), f"{p}.rank", 0), streams=tuple(streams)))
    ro = obj(get(o, "reference", ""), "reference")
    inputs = obj(get(ro, "inputs", "reference"), "reference.inputs")
    rpr = ro.get("rowsPerRank")
    tol = get(ro, "tolerance", "reference")
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0:
        raise ManifestError("reference.tolerance", f"expected a positive number, got {tol!r}")
    reference = ReferenceSpec(
        operator=enum(get(ro, "operator", "reference"), OPERATORS, "reference.operator"),
        M=int_(get(ro, "M", "reference"), "reference.M", 1),
        N=int_(get(ro, "N", "reference"), "reference.N", 1),
        K=int_(get(ro, "K", "reference"), "reference.K", 1),
        inputs={ident(k, "reference.inputs key"): ident(v, f"reference.inputs.{k}") for k, v in inputs.items()},
        output=ident(get(ro, "output", "reference"), "reference.output"),
        rows_per_rank=None if rpr is None else int_(rpr, "reference.rowsPerRank", 1),
        tolerance=float(tol),
        group_table=None if ro.get("groupTable") is None else ident(ro["groupTable"], "reference.groupTable"),
        row_counts=row_counts(ro.get("rowCounts")),
    )
    tmo = obj(get(o, "timing", ""), "timing")
    timing = TimingSpec(
        warmup=int_(get(tmo, "warmup", "timing"), "timing.warmup", 0),
        reps=int_(get(tmo, "reps", "timing"), "timing.reps", 1),
        check_runs=int_(get(tmo, "checkRuns", "timing"), "timing.checkRuns", 1),
    )
    m = Manifest(
        name=ident(get(o, "name", ""), "name"),
        world=world,
        dtype=enum(get(o, "dtype", ""), FLOAT_DTYPES, "dtype"),
        buffers=tuple(buffers),
        signals=signals,
        tables=tuple(tables),
        kernels=kernels,
        host_ops=tuple(host_ops),
        reference=reference,
        timing=timing,
        wait_timeout_ns=int_(get(o, "waitTimeoutNs", ""), "waitTimeoutNs", 1),
        base_dir=base_dir,
        raw=o,
        rows=None if o.get("rows") is None else _rows(o["rows"], "rows", world),
    )
    check_references(m)
    return m


def _rows(v: Any, path: str, world: int) -> RowsSpec:
    """The ``rows`` section's scalars (its expressions are read when the manifest is instantiated)."""
    o = obj(v, path)
    rng = obj(get(o, "range", path), f"{path}.range")
    fb = o.get("fallbackBelow")
    reason = o.get("fallbackReason")
    spec = RowsSpec(
        variable=ident(get(o, "variable", path), f"{path}.variable"),
        min=int_(get(rng, "min", f"{path}.range"), f"{path}.range.min", 1),
        max=int_(get(rng, "max", f"{path}.range"), f"{path}.range.max", 1),
        multiple=int_(get(o, "multiple", path), f"{path}.multiple", 1),
        at=int_(get(o, "at", path), f"{path}.at", 1),
        fallback_below=None if fb is None else int_(fb, f"{path}.fallbackBelow", 1),
        fallback_reason=None if reason is None else str(reason),
    )
    if spec.min > spec.max or not spec.serves(spec.at) or spec.multiple % world:
        raise ManifestError(
            path, f"serves {spec.min}..{spec.max} in multiples of {spec.multiple} (of the world {world}) and describes {spec.at}"
        )
    return spec


def load_manifest(path: str | Path, rows: int | None = None, symbolic: bool = False) -> Manifest:
    """Load a manifest JSON file; kernel sources resolve relative to its folder. A manifest whose row count is a
    run-time argument is made concrete at ``rows`` (default: the M it describes), or kept as it is with
    ``symbolic`` (for a runner that binds it to each call's M)."""
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
    m = parse_manifest(data, p.resolve().parent)
    if m.rows is None:
        if rows is not None and rows != m.reference.M:
            raise ManifestError("rows", f"{p} is compiled for M = {m.reference.M}; it takes no other row count")
        return m
    if symbolic:
        return m
    return instantiate(m, m.rows.at if rows is None else rows)


def instantiate(m: Manifest, M: int) -> Manifest:
    """``m`` (whose row count is a run-time argument) at ``M`` rows: an ordinary manifest, its row-count
    arguments named (``rows_args``). ``UsageError`` when ``m`` does not serve ``M``."""
    return replace(parse_manifest(instantiate_data(m, M), m.base_dir), rows_args=rows_args(m))
