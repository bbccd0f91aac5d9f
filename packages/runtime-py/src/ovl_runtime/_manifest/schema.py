"""The ``ovl.manifest/v1`` JSON Schema, checked before a manifest is parsed.

The schema is the one the emitter generates from its zod definition (``@ovl/tlx-emitter``
``manifest/schema.ts``); its build writes a copy into this package
(``ovl_runtime/schema/manifest.schema.json``), so the runner checks exactly the contract the
emitter writes. A manifest that breaks it is a ``ManifestError`` naming the JSON path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from ..errors import ManifestError

SCHEMA_RESOURCE = "schema/manifest.schema.json"


@cache
def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``ovl.manifest/v1`` shipped with the package."""
    text = resources.files("ovl_runtime").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = manifest_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def json_path(parts: Iterable[str | int]) -> str:
    """A JSON location as the runner's errors spell it: ``hostOps[0].streams[1].ops[2].src``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else p
    return out


def _kind_of(branch: Any) -> Any:
    """The ``kind`` constant a union branch requires, if it names one."""
    if not isinstance(branch, dict):
        return None
    kind = branch.get("properties", {}).get("kind", {})
    return kind.get("const") if isinstance(kind, dict) else None


def _specific(error: ValidationError) -> tuple[ValidationError, str]:
    """The violation to report and what to say: unions of ``kind``-tagged shapes (kernel
    arguments, host ops, grid entries) are resolved by the instance's ``kind``, so the
    message names the field that is wrong instead of repeating the whole value."""
    if error.validator in ("anyOf", "oneOf") and isinstance(error.instance, dict) and "kind" in error.instance:
        kinds = [_kind_of(b) for b in error.validator_value]
        kind = error.instance["kind"]
        if kind not in kinds:
            allowed = ", ".join(repr(k) for k in kinds if k is not None)
            return error, f"kind {kind!r} is not one of {allowed}"
        branch = kinds.index(kind)
        inner = best_match(e for e in error.context or () if e.relative_schema_path and e.relative_schema_path[0] == branch)
        if inner is not None:
            return _specific(inner)
    if error.validator in ("anyOf", "oneOf"):
        return error, "matches none of the shapes the schema allows here"
    return error, error.message


def _describe(message: str) -> str:
    if len(message) > 300:
        message = message[:297] + "..."
    return f"does not satisfy ovl.manifest/v1: {message}"


def check_manifest_schema(data: Any) -> None:
    """Validates parsed manifest JSON against the shipped schema.

    @raises ManifestError whose ``path`` is the JSON location of the first violation (the
    most specific one when several branches of a union fail) and whose message says what
    the schema wanted there.
    """
    error = best_match(_validator().iter_errors(data))
    if error is None:
        return
    error, message = _specific(error)
    raise ManifestError(json_path(error.absolute_path), _describe(message))
