"""A manifest whose row count is a run-time argument, made concrete for one M (``instantiate_data``).

The compiler writes such a manifest (``rows``: the M it serves, buffer rows, host copies and m-block count as
``@ovl/mapping`` expressions of M) and checks its plan at every M it serves; the runner instantiates it for each M
a call brings, as ``@ovl/tlx-emitter``'s ``instantiateRows`` does: each row-scaled buffer gets its rows, the host
ops their offsets and lengths, a ``rows`` kernel argument (M, or M / its ``divisor``) and the row variable of the tile programs' maps M, the
reference M, each table of ``rows.tables`` its per-rank values. Pure Python: JSON in, a parsed manifest out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ManifestError, UsageError
from .expr import check_expr, evaluate
from .types import Manifest


def _bind(e: Any, var: str, M: int) -> Any:
    """The expression ``e`` with variable ``var`` replaced by the constant ``M`` (its range checked)."""
    if not isinstance(e, dict):
        return e
    op = e.get("op")
    if op == "var" and e.get("name") == var:
        lo, hi = e["range"]["min"], e["range"]["max"]
        if not lo <= M <= hi:
            raise ManifestError("rows", f"{var} = {M} is outside its declared range [{lo}, {hi}]")
        return {"op": "const", "value": M}
    if op in ("add", "mul", "min", "max"):
        return {"op": op, "args": [_bind(a, var, M) for a in e["args"]]}
    if op in ("floorDiv", "ceilDiv", "mod"):
        return {"op": op, "dividend": _bind(e["dividend"], var, M), "divisor": _bind(e["divisor"], var, M)}
    return e


def _map(m: Any, var: str, M: int) -> Any:
    if not isinstance(m, dict):
        return m
    if m.get("kind") == "static":
        return {**m, "expr": _bind(m["expr"], var, M)}
    if m.get("kind") == "dynamic":
        return {**m, "index": _bind(m["index"], var, M)}
    return m


def _rows_arg(a: Any, M: int) -> int:
    """A ``rows`` kernel argument's value at ``M``: M, or M / ``divisor`` (rows per rank) where it names one."""
    divisor = a["value"].get("divisor", 1)
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 1 or M % divisor:
        raise ManifestError(f"kernels.args.{a['name']}.divisor", f"must be a positive integer dividing M = {M}, got {divisor!r}")
    return M // divisor


def instantiate_data(m: Manifest, M: int) -> dict[str, Any]:
    """The JSON of ``m`` at ``M`` rows (an ordinary manifest's; ``_manifest.parse.instantiate`` parses it).
    ``UsageError`` when ``m`` does not serve ``M``."""
    spec = m.rows
    if spec is None:
        raise UsageError(f"{m.name} is compiled for M = {m.reference.M}; it takes no other row count")
    if not spec.serves(M):
        raise UsageError(f"{m.name} serves row counts {spec.min}..{spec.max} in multiples of {spec.multiple}, not {M}")
    raw = m.raw
    rows = raw["rows"]
    env = {spec.variable: M}

    def value(e: Any, where: str, positive: bool) -> int:
        check_expr(e, where)
        v = evaluate(e, env, where)
        if positive and v < 1:
            raise ManifestError(where, f"is {v} at M = {M}")
        return v

    buffers = []
    for b in raw["buffers"]:
        e = rows["buffers"].get(b["name"])
        buffers.append(b if e is None else {**b, "shape": [value(e, f"rows.buffers.{b['name']}", True), *b["shape"][1:]]})
    host_ops = []
    for i, r in enumerate(rows["hostOps"]):
        streams = []
        for j, s in enumerate(r["streams"]):
            ops = []
            for k, op in enumerate(s["ops"]):
                where = f"rows.hostOps[{i}].streams[{j}].ops[{k}]"

                def seg(x: Any, end: str, where: str = where) -> dict[str, Any]:
                    return {
                        "buffer": x["buffer"],
                        "rank": x["rank"],
                        "offset": value(x["offset"], f"{where}.{end}.offset", False),
                        "length": value(x["length"], f"{where}.{end}.length", True),
                    }

                ops.append({**op, "src": seg(op["src"], "src"), "dst": seg(op["dst"], "dst")})
            streams.append({"name": s["name"], "ops": ops})
        host_ops.append({"rank": r["rank"], "streams": streams})
    tables = []
    for t in raw["tables"]:
        per_rank = (rows.get("tables") or {}).get(t["name"])
        if per_rank is None:
            tables.append(t)
            continue
        where = f"rows.tables.{t['name']}"
        if (
            not isinstance(per_rank, list)
            or len(per_rank) != len(t["values"])
            or any(not isinstance(r, list) or len(r) != len(v) for r, v in zip(per_rank, t["values"], strict=False))
        ):
            raise ManifestError(where, f"is not shaped like table {t['name']}")
        tables.append({**t, "values": [[value(e, f"{where}[{i}][{j}]", False) for j, e in enumerate(r)] for i, r in enumerate(per_rank)]})
    num_pid_m = value(rows["numPidM"], "rows.numPidM", True)
    kernels = [_kernel(k, (rows.get("kernels") or {}).get(k["name"]) or {}, spec.variable, M, num_pid_m, value) for k in raw["kernels"]]
    ref = {**raw["reference"], "M": M}
    if "rowsPerRank" in ref:
        ref["rowsPerRank"] = M // m.world
    data = {k: v for k, v in raw.items() if k != "rows"}
    data.update(buffers=buffers, tables=tables, hostOps=host_ops, kernels=kernels, reference=ref)
    return data


def _kernel(k: Any, more: Any, var: str, M: int, num_pid_m: int, value: Callable[[Any, str, bool], int]) -> dict[str, Any]:
    """Kernel ``k`` at ``M`` rows: its ``rows`` arguments M (or M / their divisor), and what ``more`` (its entry of ``rows.kernels``) says of
    its int arguments, grid, template params and gather sizes; its tile program's maps bound at M."""
    where = f"rows.kernels.{k['name']}"
    args = more.get("args") or {}
    unknown = sorted(set(args) - {a["name"] for a in k["args"] if a["value"]["kind"] == "int"})
    if unknown:
        raise ManifestError(f"{where}.args", f"names {', '.join(unknown)}, which are not int arguments of {k['name']}")

    def arg(a: Any) -> Any:
        if a["name"] in args:
            return {"name": a["name"], "value": {"kind": "int", "value": value(args[a["name"]], f"{where}.args.{a['name']}", False)}}
        return a if a["value"]["kind"] != "rows" else {"name": a["name"], "value": {"kind": "int", "value": _rows_arg(a, M)}}

    params = dict(k["template"]["params"])
    if any(a["value"]["kind"] == "rows" for a in k["args"]) and "M" in params:
        params["M"] = M
    for name, e in (more.get("params") or {}).items():
        params[name] = value(e, f"{where}.params.{name}", False)
    out = {**k, "args": [arg(a) for a in k["args"]], "template": {**k["template"], "params": params}}
    if more.get("grid") is not None:
        out["grid"] = [value(e, f"{where}.grid[{i}]", True) for i, e in enumerate(more["grid"])]
    tp = k.get("tileProgram")
    if tp is not None:
        out["tileProgram"] = {
            **tp,
            "order": _map(tp["order"], var, M),
            "slots": [_map(s, var, M) for s in tp["slots"]],
            "numPidM": num_pid_m,
        }
        gather, sizes = tp.get("gather"), more.get("gather")
        if gather is not None:
            bound = {**gather, "segment": _map(gather["segment"], var, M)}
            if sizes is not None:
                bound.update(
                    limit=value(sizes["limit"], f"{where}.gather.limit", True),
                    rowCount=value(sizes["rowCount"], f"{where}.gather.rowCount", True),
                )
            out["tileProgram"]["gather"] = bound
    return out


def rows_args(m: Manifest) -> frozenset[str]:
    """The kernel arguments of ``m`` that take the row count, or an expression of it (``rows.kernels``)."""
    taken = {a["name"] for k in m.raw["kernels"] for a in k["args"] if a["value"]["kind"] == "rows"}
    for more in ((m.raw.get("rows") or {}).get("kernels") or {}).values():
        taken.update((more or {}).get("args") or {})
    return frozenset(taken)
