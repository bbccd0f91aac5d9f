"""The Report, ``ovl.report/v1``: what ran, where, whether it was right, how fast.

Plain JSON with camelCase keys (the TypeScript driver parses it with a zod schema).
Relative errors that could not be computed (NaN/inf in an output) are ``null``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .._manifest.types import Manifest
from .outcome import RunOutcome

REPORT_SCHEMA = "ovl.report/v1"


def _num(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else float(x)


def time_summary(samples: list[float]) -> dict[str, Any]:
    """Median, 10th and 90th percentile (ms) of one rank's launches."""
    a = np.asarray(samples, dtype=np.float64)
    return {
        "median": float(np.median(a)),
        "p10": float(np.percentile(a, 10)),
        "p90": float(np.percentile(a, 90)),
        "samples": len(samples),
    }


def build_report(m: Manifest, outcome: RunOutcome) -> dict[str, Any]:
    """The report of one run of ``m`` (either mode)."""
    ref = m.reference
    times: dict[str, Any] | None = None
    if outcome.times_ms and all(outcome.times_ms):
        per_rank = [{"rank": r, **time_summary(t)} for r, t in enumerate(outcome.times_ms)]
        times = {
            "unit": "ms",
            "clock": outcome.clock,
            "perRank": per_rank,
            "maxMedian": max(p["median"] for p in per_rank),
        }
    return {
        "$schema": REPORT_SCHEMA,
        "manifest": m.name,
        "mode": outcome.mode,
        "device": outcome.device,
        "world": m.world,
        "dtype": m.dtype,
        "shapes": {
            "operator": ref.operator,
            "M": ref.M,
            "N": ref.N,
            "K": ref.K,
            "rowsPerRank": ref.rows_per_rank,
            "buffers": {b.name: list(b.shape) for b in m.buffers},
        },
        "backends": {
            "symmetricMemory": outcome.backend,
            "hostOps": "copy-engine" if any(s.ops for h in m.host_ops for s in h.streams) else "none",
            "kernels": [{"name": k.name, "template": k.template_kind, "stream": k.stream} for k in m.kernels],
        },
        "epochs": len(outcome.checks),
        "checks": [
            {
                "run": c.run,
                "epoch": c.epoch,
                "relErrors": [_num(e) for e in c.rel_errors],
                "maxRelError": c.max_rel_error,
                "tolerance": c.tolerance,
                "ok": c.ok,
            }
            for c in outcome.checks
        ],
        "times": times,
        "baselines": [{"name": b.name, "ms": b.ms, **({"error": b.error} if b.error else {})} for b in outcome.baselines],
        "failures": [f.to_json() for f in outcome.failures],
        "ok": outcome.ok,
        **({"extra": outcome.extra} if outcome.extra else {}),
    }


def write_report(report: dict[str, Any], path: str | Path | None) -> None:
    """Write the report to ``path``, or to stdout when no path is given."""
    text = json.dumps(report, indent=2)
    if path is None:
        print(text, flush=True)
    else:
        Path(path).write_text(text + "\n", encoding="utf-8")
