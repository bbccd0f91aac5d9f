"""Cross-field checks of a manifest: what a JSON Schema cannot say.

Every name resolves (buffers, tables, the signal buffer), segments stay inside their
buffers, peers are addressed only through symmetric buffers, slots are in range, tables
have one row per rank, and the reference has the inputs its operator needs and states
its row shards once (``shards``).
"""

from __future__ import annotations

from ..errors import ManifestError
from ..operators.ag_attention.spec import check_attention
from ..operators.ag_moe.checks import check_moe, check_routing_buffer
from ..operators.moe_rs.checks import check_moe_rs_reference
from .nvshmem import check_nvshmem
from .shards import check_row_shards
from .types import BufferSpec, HostOp, Manifest, WaitOp


def _unique(names: list[str], path: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ManifestError(path, f"name {n!r} is used twice")
        seen.add(n)


def check_references(m: Manifest) -> None:
    """Cross-field checks: every name resolves, every segment and slot is in range."""
    _unique([b.name for b in m.buffers], "buffers")
    _unique([t.name for t in m.tables], "tables")
    _unique([k.name for k in m.kernels], "kernels")
    bufs = {b.name: b for b in m.buffers}
    for i, b in enumerate(m.buffers):
        check_routing_buffer(b, f"buffers[{i}]")
    sig = bufs.get(m.signals.buffer)
    if sig is None:
        raise ManifestError("signals.buffer", f"names no buffer ({m.signals.buffer!r})")
    want = ("uint32", "int32") if m.signals.bits == 32 else ("int64",)
    if not sig.symmetric or sig.dtype not in want:
        raise ManifestError("signals.buffer", f"{sig.name!r} must be a symmetric {' or '.join(want)} buffer")
    if sig.numel < m.signals.slots:
        raise ManifestError("signals.slots", f"{m.signals.slots} slots do not fit buffer {sig.name!r} of {sig.numel} elements")
    for i, t in enumerate(m.tables):
        if len(t.values) != m.world:
            raise ManifestError(f"tables[{i}].values", f"needs one row per rank ({m.world}), got {len(t.values)}")
        if len({len(r) for r in t.values}) != 1:
            raise ManifestError(f"tables[{i}].values", "every rank's row must have the same length")
    tables = {t.name for t in m.tables}
    for i, k in enumerate(m.kernels):
        for j, (_, a) in enumerate(k.args):
            p = f"kernels[{i}].args[{j}].value"
            if a.kind == "buffer" and a.name not in bufs:
                raise ManifestError(f"{p}.name", f"names no buffer ({a.name!r})")
            if a.kind == "table" and a.name not in tables:
                raise ManifestError(f"{p}.name", f"names no table ({a.name!r})")
            if a.kind == "peer-pointers":
                pb = bufs.get(a.buffer or "")
                if pb is None or not pb.symmetric:
                    raise ManifestError(f"{p}.buffer", f"peer pointers need a symmetric buffer, {a.buffer!r} is not one")
    ranks = [h.rank for h in m.host_ops]
    for i, h in enumerate(m.host_ops):
        p = f"hostOps[{i}]"
        if h.rank >= m.world:
            raise ManifestError(f"{p}.rank", f"rank {h.rank} is outside the world of {m.world}")
        if ranks.count(h.rank) > 1:
            raise ManifestError(f"{p}.rank", f"rank {h.rank} is listed twice")
        _unique([s.name for s in h.streams], f"{p}.streams")
        for j, s in enumerate(h.streams):
            for n, op in enumerate(s.ops):
                _check_op(m, bufs, h.rank, op, f"{p}.streams[{j}].ops[{n}]")
    ref = m.reference
    named = [(f"reference.inputs.{k}", v) for k, v in ref.inputs.items()] + [("reference.output", ref.output)]
    for where, name in named:
        if name not in bufs:
            raise ManifestError(where, f"names no buffer ({name!r})")
    if ref.operator in ("ag-gemm", "gemm-rs", "gemm-ar", "ag-grouped-gemm", "a2a-gemm", "ag-gemm-silu"):
        for key in ("A", "B"):
            if key not in ref.inputs:
                raise ManifestError(f"reference.inputs.{key}", f"{ref.operator} needs inputs A and B")
    elif ref.operator == "ag-attention":
        check_attention(m)
    elif ref.operator == "ag-moe":
        check_moe(m)
    elif ref.operator == "moe-rs":
        check_moe_rs_reference(m)
    elif len(ref.inputs) != 1:
        raise ManifestError("reference.inputs", f"{ref.operator} takes exactly one input (conventionally X)")
    check_row_shards(m)
    check_nvshmem(m, bufs)
    if ref.operator == "ag-grouped-gemm":
        _check_groups(m, bufs)
    elif ref.group_table is not None:
        raise ManifestError("reference.groupTable", f"only ag-grouped-gemm reads a group table, not {ref.operator}")


def _check_groups(m: Manifest, bufs: dict[str, BufferSpec]) -> None:
    """The grouped GEMM's table: one row, the same on every rank, of experts in range of B."""
    ref = m.reference
    if ref.group_table is None:
        raise ManifestError("reference.groupTable", "ag-grouped-gemm needs groupTable, the table of the expert of each m-block")
    t = next((x for x in m.tables if x.name == ref.group_table), None)
    if t is None:
        raise ManifestError("reference.groupTable", f"names no table ({ref.group_table!r})")
    row = list(t.values[0])
    if not row or ref.M % len(row) != 0:
        raise ManifestError(
            "reference.groupTable", f"table {t.name!r} has {len(row)} entries, which do not divide M ({ref.M}) into m-blocks"
        )
    if any(list(r) != row for r in t.values):
        raise ManifestError("reference.groupTable", f"table {t.name!r} must be the same on every rank")
    experts, rest = divmod(bufs[ref.inputs["B"]].numel, ref.K * ref.N)
    if rest != 0:
        raise ManifestError(
            "reference.inputs.B",
            f"buffer {ref.inputs['B']!r} of {bufs[ref.inputs['B']].numel} elements is not [E, K, N] with K x N = {ref.K * ref.N}",
        )
    for mb, e in enumerate(row):
        if not 0 <= e < experts:
            raise ManifestError("reference.groupTable", f"m-block {mb} names expert {e}, outside [0, {experts})")


def _check_op(m: Manifest, bufs: dict[str, BufferSpec], rank: int, op: HostOp, p: str) -> None:
    if isinstance(op, WaitOp):
        if op.slot >= m.signals.slots:
            raise ManifestError(f"{p}.slot", f"slot {op.slot} is outside the {m.signals.slots} signal slots")
        if op.rank is not None and op.rank >= m.world:
            raise ManifestError(f"{p}.rank", f"rank {op.rank} is outside the world of {m.world}")
        return
    dtypes = []
    for side, seg in (("src", op.src), ("dst", op.dst)):
        b = bufs.get(seg.buffer)
        if b is None:
            raise ManifestError(f"{p}.{side}.buffer", f"names no buffer ({seg.buffer!r})")
        if seg.rank >= m.world:
            raise ManifestError(f"{p}.{side}.rank", f"rank {seg.rank} is outside the world of {m.world}")
        if seg.rank != rank and not b.symmetric:
            raise ManifestError(f"{p}.{side}", f"rank {rank} cannot address {b.name!r} on rank {seg.rank}: the buffer is not symmetric")
        if seg.offset + seg.length > b.numel:
            raise ManifestError(
                f"{p}.{side}", f"elements [{seg.offset}, {seg.offset + seg.length}) reach past {b.name!r} ({b.numel} elements)"
            )
        dtypes.append(b.dtype)
    if dtypes[0] != dtypes[1]:
        raise ManifestError(p, f"copies between dtypes {dtypes[0]} and {dtypes[1]}; a copy moves bytes, not values")
    if op.signal is not None:
        if op.signal.rank >= m.world:
            raise ManifestError(f"{p}.signal.rank", f"rank {op.signal.rank} is outside the world of {m.world}")
        if op.signal.slot >= m.signals.slots:
            raise ManifestError(f"{p}.signal.slot", f"slot {op.signal.slot} is outside the {m.signals.slots} signal slots")
