"""The typed form of an ``ovl.manifest/v1`` document: one frozen dataclass per schema object.

Field for field the emitter's zod schema (``@ovl/tlx-emitter`` ``manifest/schema.ts``),
with snake_case names; ``_manifest/parse.py`` reads JSON into these and validates it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ManifestError

MANIFEST_SCHEMA = "ovl.manifest/v1"
BUFFER_DTYPES = ("bf16", "fp16", "fp32", "fp8e4m3", "int32", "uint32", "int64")
#: A manifest's operand types; ``fp8e4m3`` (AllGather+GEMM): fp8 A and B (held as Bt ``[N, K]``), fp32 scales, a bf16 output.
FLOAT_DTYPES = ("bf16", "fp16", "fp32", "fp8e4m3")
OPERATORS = (
    "ag-gemm",
    "gemm-rs",
    "gemm-ar",
    "all-gather",
    "reduce-scatter",
    "all-reduce",
    "ag-grouped-gemm",
    "ag-moe",
    "ag-attention",
    "a2a-gemm",
    "ag-gemm-silu",
    "moe-rs",
)
ARG_KINDS = (
    "buffer",
    "peer-pointers",
    "table",
    "int",
    "rank",
    "world",
    "epoch",
    "epoch-target",
    "epoch-word",
    "timeout-ns",
    "error-buffer",
    "num-programs",
    "rows",
)


@dataclass(frozen=True)
class RoutingInit:
    """How a ``routing`` buffer is drawn (``ovl_runtime.operators.ag_moe.routing``): each token's k distinct experts
    from ``choices`` (default every one of ``experts``)."""

    experts: int
    choices: tuple[int, ...] | None = None


@dataclass(frozen=True)
class BufferSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    symmetric: bool
    init: str  # random | zeros | poison | keep | routing | replicated
    routing: RoutingInit | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Segment:
    buffer: str
    rank: int
    offset: int
    length: int


@dataclass(frozen=True)
class SignalWrite:
    rank: int
    slot: int


@dataclass(frozen=True)
class CopyOp:
    src: Segment
    dst: Segment
    signal: SignalWrite | None
    kind: str = "copy"


@dataclass(frozen=True)
class WaitOp:
    """The stream waits until ``slot`` of rank ``rank``'s signal buffer reaches the epoch
    target; ``rank`` None is the issuing rank (a peer's slot is read through its peer
    address, as a pull ring's forwarding step needs)."""

    slot: int
    arrivals: int
    rank: int | None = None
    kind: str = "wait"

    def rank_of(self, issuer: int) -> int:
        """The rank whose slot this wait reads, issued by ``issuer``."""
        return issuer if self.rank is None else self.rank


HostOp = CopyOp | WaitOp


@dataclass(frozen=True)
class CommStream:
    name: str
    ops: tuple[HostOp, ...]


@dataclass(frozen=True)
class RankHostOps:
    rank: int
    streams: tuple[CommStream, ...]


@dataclass(frozen=True)
class TableSpec:
    name: str
    dtype: str
    values: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class KernelArg:
    """One argument; ``name`` (buffer/table), ``buffer``, ``value`` or ``arrivals`` per ``kind``."""

    kind: str
    name: str | None = None
    buffer: str | None = None
    value: int | None = None
    arrivals: int | None = None


@dataclass(frozen=True)
class NumSms:
    """A grid dimension of the device's multiprocessor count, less ``reserve`` SMs left to
    other kernels (at least 1), at most ``cap``."""

    cap: int | None = None
    reserve: int = 0

    def resolve(self, num_sms: int) -> int:
        n = max(1, num_sms - self.reserve)
        return min(n, self.cap) if self.cap else n


GridDim = int | NumSms
PRECOMPILED_TARGETS = ("sm_90a", "sm_100a")
#: ``kernels[i].requires`` of a kernel that calls NVSHMEM's device API (the ``nvshmem`` transfer backend).
NVSHMEM = "nvshmem"
KERNEL_REQUIREMENTS = (NVSHMEM,)


@dataclass(frozen=True)
class PrecompiledSpec:
    """Where the ahead-of-time compiled cubin of a kernel and its ``ovl.cubin-metadata/v1``
    JSON live, relative to the manifest (``*_path``: resolved against its folder, when known)."""

    target: str
    cubin: str
    metadata: str
    cubin_path: Path | None = None
    metadata_path: Path | None = None
    # The cluster shape it is compiled for (``ctas_per_cga``), e.g. (2, 1, 1); None: no clusters.
    cluster: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class KernelSpec:
    name: str
    source: str
    entry: str
    stream: str
    grid: tuple[GridDim, ...]
    num_warps: int
    num_stages: int
    args: tuple[tuple[str, KernelArg], ...]
    constexprs: dict[str, int | float | bool]
    template_kind: str
    template_params: dict[str, int | float | str | bool]
    source_path: Path | None = None
    precompiled: PrecompiledSpec | None = None
    # The tile program of a compiled local body (index_maps.TileProgram), if any.
    tile_program: Any = None
    #: What the runner must provide before it launches the kernel (``kernels[i].requires``), e.g. ``("nvshmem",)``.
    requires: tuple[str, ...] = ()

    def arg(self, name: str) -> KernelArg:
        for n, a in self.args:
            if n == name:
                return a
        raise ManifestError(f"kernel {self.name}", f"template {self.template_kind} needs argument {name!r}, which args does not list")


@dataclass(frozen=True)
class SignalsSpec:
    buffer: str
    slots: int
    bits: int


@dataclass(frozen=True)
class RowsSpec:
    """A manifest whose row count M is a run-time argument (``rows``): the M it serves, the M its other fields
    describe, and below which M the operator should not overlap (the runner's plain path), with the reason.
    ``instantiate`` makes it concrete at an M (:mod:`ovl_runtime._manifest.rows`)."""

    variable: str
    min: int
    max: int
    multiple: int
    at: int
    fallback_below: int | None = None
    fallback_reason: str | None = None

    def serves(self, M: int) -> bool:
        return self.min <= M <= self.max and M % self.multiple == 0


@dataclass(frozen=True)
class ReferenceSpec:
    operator: str
    M: int
    N: int
    K: int
    inputs: dict[str, str]
    output: str
    rows_per_rank: int | None
    tolerance: float
    # ag-grouped-gemm: the table (in ``tables``) of the expert of each global m-block.
    group_table: str | None = None
    # Uneven row shards: the rows of each rank in rank order (``rowCounts``; see ``shards``).
    row_counts: tuple[int, ...] | None = None


@dataclass(frozen=True)
class TimingSpec:
    warmup: int
    reps: int
    check_runs: int


@dataclass(frozen=True)
class Manifest:
    name: str
    world: int
    dtype: str
    buffers: tuple[BufferSpec, ...]
    signals: SignalsSpec
    tables: tuple[TableSpec, ...]
    kernels: tuple[KernelSpec, ...]
    host_ops: tuple[RankHostOps, ...]
    reference: ReferenceSpec
    timing: TimingSpec
    wait_timeout_ns: int
    base_dir: Path | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: Set where the row count is a run-time argument (the other fields then describe ``rows.at`` rows).
    rows: RowsSpec | None = None
    #: Of a manifest instantiated from one whose rows are a run-time argument: the kernel arguments that take the
    #: row count (one compiled kernel serves every M: these must not be specialised on their value).
    rows_args: frozenset[str] = frozenset()

    @property
    def requires_nvshmem(self) -> bool:
        """Whether a kernel calls NVSHMEM (the ``nvshmem`` transfer backend): symmetric buffers must then come from
        NVSHMEM's heap, through PyTorch's NVSHMEM backend (one process per GPU) or through nvshmem4py (processes sharing
        a GPU: ``_runner.nvshmem_select``)."""
        return any(NVSHMEM in k.requires for k in self.kernels)

    def buffer(self, name: str) -> BufferSpec:
        for b in self.buffers:
            if b.name == name:
                return b
        raise ManifestError("buffers", f"no buffer named {name!r}")

    def table(self, name: str) -> TableSpec:
        for t in self.tables:
            if t.name == name:
                return t
        raise ManifestError("tables", f"no table named {name!r}")

    def streams_of(self, rank: int) -> tuple[CommStream, ...]:
        for h in self.host_ops:
            if h.rank == rank:
                return h.streams
        return ()
