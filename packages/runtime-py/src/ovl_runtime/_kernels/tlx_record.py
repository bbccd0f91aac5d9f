"""What a prepared TLX directory records (``backend.json``: which backend the tuned table takes at its shape) and how
``OVL_TLX`` reads: the pure half of :mod:`ovl_runtime._kernels.tlx`, which the kernel library consults when it picks
a call's key. Pure Python: no torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import UsageError

#: The environment variable that turns the TLX kernels off (``0``), on wherever prepared (``1``) or on where the
#: tuned table measured them faster (``auto``, the default).
TLX_ENV = "OVL_TLX"
#: The record a prepared TLX directory carries beside its manifest.
RECORD = "backend.json"
RECORD_SCHEMA = "ovl.tlx-backend/v1"


def tlx_mode() -> str:
    """``off``, ``force`` or ``auto`` from ``$OVL_TLX`` (``0`` / ``1`` / unset or ``auto``)."""
    v = os.environ.get(TLX_ENV, "").strip().lower()
    if v in ("", "auto"):
        return "auto"
    if v == "0":
        return "off"
    if v == "1":
        return "force"
    raise UsageError(f"{TLX_ENV}={v!r}: use 0 (Triton kernels only), 1 (every prepared TLX kernel) or auto (the tuned table's pick)")


def read_record(directory: Path) -> dict[str, Any]:
    """The ``backend.json`` of a prepared TLX directory ({} when there is none or it does not parse)."""
    try:
        rec = json.loads((directory / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) and rec.get("$schema") == RECORD_SCHEMA else {}


def table_prefers_tlx(directory: Path) -> bool:
    """Whether the prepared directory's record says ``fastestBackend()`` takes TLX at its shape."""
    return read_record(directory).get("fastest") == "tlx"
