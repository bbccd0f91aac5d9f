"""The compiler's symbolic integer expressions (``@ovl/mapping``'s JSON ``Expr``), evaluated in Python.

A manifest whose row count is a run-time argument carries its buffer shapes and host copies as
expressions over the rows ``M``; the runner evaluates them for each ``M`` it is called with. Semantics
match ``@ovl/mapping``'s ``evaluate``: floor division and modulo round toward −∞ (Python's), ``ceilDiv(a, b)
= −((−a) // b)``, a variable outside its declared range is an error. Plain data in, an int out: nothing is
executed. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ManifestError

_NARY = {"add", "mul", "min", "max"}
_DIV = {"floorDiv", "ceilDiv", "mod"}


def check_expr(e: Any, where: str) -> None:
    """Refuse anything that is not an expression node tree (``ManifestError`` naming ``where``)."""
    if not isinstance(e, dict) or "op" not in e:
        raise ManifestError(where, f"is not an expression: {e!r}")
    op = e["op"]
    if op == "const":
        if not isinstance(e.get("value"), int) or isinstance(e.get("value"), bool):
            raise ManifestError(where, f"a constant needs an integer value, got {e.get('value')!r}")
    elif op == "var":
        name, rng = e.get("name"), e.get("range")
        if not isinstance(name, str) or not name.isidentifier():
            raise ManifestError(where, f"a variable needs an identifier name, got {name!r}")
        if not (isinstance(rng, dict) and isinstance(rng.get("min"), int) and isinstance(rng.get("max"), int) and rng["min"] <= rng["max"]):
            raise ManifestError(where, f"variable {name} needs a range with min <= max, got {rng!r}")
    elif op in _NARY:
        args = e.get("args")
        if not isinstance(args, list) or not args:
            raise ManifestError(where, f"{op} needs a non-empty list of operands")
        for i, a in enumerate(args):
            check_expr(a, f"{where}.args[{i}]")
    elif op in _DIV:
        check_expr(e.get("dividend"), f"{where}.dividend")
        check_expr(e.get("divisor"), f"{where}.divisor")
    else:
        raise ManifestError(where, f"unknown expression node {op!r}")


def evaluate(e: Mapping[str, Any], env: Mapping[str, int], where: str = "expression") -> int:
    """The value of ``e`` with the variables of ``env``; ``ManifestError`` for an unknown or out-of-range
    variable or a division by zero."""
    op = e["op"]
    if op == "const":
        return int(e["value"])
    if op == "var":
        name = e["name"]
        if name not in env:
            raise ManifestError(where, f"no value for variable {name}")
        v = env[name]
        lo, hi = e["range"]["min"], e["range"]["max"]
        if not lo <= v <= hi:
            raise ManifestError(where, f"{name} = {v} is outside its declared range [{lo}, {hi}]")
        return v
    if op in _NARY:
        vals = [evaluate(a, env, where) for a in e["args"]]
        if op == "add":
            return sum(vals)
        if op == "mul":
            out = 1
            for v in vals:
                out *= v
            return out
        return min(vals) if op == "min" else max(vals)
    a, b = evaluate(e["dividend"], env, where), evaluate(e["divisor"], env, where)
    if b == 0:
        raise ManifestError(where, "division by zero")
    if op == "floorDiv":
        return a // b
    if op == "ceilDiv":
        return -((-a) // b)
    return a % b
