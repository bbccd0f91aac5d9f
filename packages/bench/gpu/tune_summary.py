"""The summary of a tune run of compute_bench.py: per shape the table's pick (what the torch API binds today) and the
on-device tuner's pick, each as cuBLAS's time over its own (1.0: cuBLAS's speed) in the same run.

The pick is made as the runtime's tuner makes it — its own rule, ``ovl_runtime._tune.select.choose`` (the table's
pick unless another candidate measured more than ``min_gain`` faster), on the medians of the first half of the
interleaved rounds — and both picks are then reported on the second half, with cuBLAS's of the same rounds. A pick
reported on the rounds it was made on would carry the winner's curse (the luckiest of five noisy medians); this
does not. Pure Python (the results' numbers): no torch.
"""

from __future__ import annotations

import statistics
from typing import Any

from ovl_runtime._tune.select import choose
from ovl_runtime._tune.settings import TuneSettings


def _ok(c: dict[str, Any]) -> bool:
    return "roundsMs" in c and bool(c.get("allWritten")) and c.get("relErr", 1.0) < 2e-2 and "waitError" not in c


def _median(rounds: list[list[float]]) -> float | None:
    flat = [t for r in rounds for t in r]
    return statistics.median(flat) if flat else None


def tune_rows(result: dict[str, Any], min_gain: float = TuneSettings.min_gain) -> list[dict[str, Any]]:
    """Per measured shape: cuBLAS's, the table pick's and the tuned pick's report-half medians (ms), their ratios,
    and what was picked and why."""
    out = []
    for r in result["shapes"]:
        rounds = r["cublas"].get("roundsMs", [])
        half = len(rounds) // 2
        if half < 1:
            continue
        cases = r["cases"]
        pick_ms = [_median(c["roundsMs"][:half]) if _ok(c) else None for c in cases]
        report_ms = [_median(c["roundsMs"][half:]) if _ok(c) else None for c in cases]
        cub = _median(rounds[half:])
        row: dict[str, Any] = {
            "name": r["name"],
            "op": r["op"],
            "control": bool(r.get("control")),
            "grid": "whole GPU" if not r.get("reserve") else f"SMs - {r['reserve']}",
            "cublasMs": cub,
            "table": cases[0]["label"] if cases else None,
        }
        try:
            c = choose(pick_ms, min_gain)
        except Exception as exc:  # noqa: BLE001 - no candidate correct at this shape: reported as such
            out.append({**row, "error": str(exc)})
            continue
        table_ms, tuned_ms = report_ms[0], report_ms[c.index]
        best = min((t for t in report_ms if t is not None), default=None)
        out.append(
            {
                **row,
                "tableMs": table_ms,
                "tunedMs": tuned_ms,
                "tableRatio": None if table_ms is None or cub is None else cub / table_ms,
                "tunedRatio": None if tuned_ms is None or cub is None else cub / tuned_ms,
                "bestRatio": None if best is None or cub is None else cub / best,
                "chosen": cases[c.index]["label"],
                "chosenSource": cases[c.index].get("source", ""),
                "tableChosen": c.index == 0,
                "reason": c.reason,
                "candidates": len(cases),
                "correct": sum(t is not None for t in report_ms),
            }
        )
    return out


def _gmean(xs: list[float]) -> str:
    return f"{statistics.geometric_mean(xs):.3f}" if xs else "-"


def summary_tune(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Print the tune table (last) and return its rows."""
    rows = tune_rows(result)
    fmt = lambda x: f"{x:6.3f}" if isinstance(x, float) else f"{'-':>6s}"  # noqa: E731
    print(
        f"{'shape':28s} {'grid':>9s} {'table':>6s} {'tuned':>6s} {'gain':>6s}  chosen (source)   ratios: cuBLAS ms / kernel ms, second half of the rounds"
    )
    for w in rows:
        if "error" in w:
            print(f"{w['name']:28s} {w['grid']:>9s} {w['error']}")
            continue
        gain = w["tunedRatio"] / w["tableRatio"] - 1 if w["tunedRatio"] and w["tableRatio"] else None
        chosen = "= table pick" if w["tableChosen"] else f"{w['chosen'].removeprefix('emitted ')} ({w['chosenSource']})"
        tag = " [control]" if w["control"] else ""
        print(
            f"{w['name'] + tag:28s} {w['grid']:>9s} {fmt(w['tableRatio'])} {fmt(w['tunedRatio'])} {f'{100 * gain:+5.1f}%' if gain is not None else '     -'}  {chosen}"
        )
    groups = (
        ("off-table AG+GEMM consumers", lambda w: not w["control"] and w["op"] == "ag-gemm"),
        ("off-table GEMM+RS producers, whole GPU", lambda w: not w["control"] and w["op"] == "gemm-rs" and w["grid"] == "whole GPU"),
        ("off-table GEMM+RS producers, beside push", lambda w: not w["control"] and w["op"] == "gemm-rs" and w["grid"] != "whole GPU"),
        ("controls (suite shapes)", lambda w: w["control"]),
    )
    for what, keep in groups:
        ws = [w for w in rows if "error" not in w and keep(w) and w["tableRatio"] and w["tunedRatio"]]
        if not ws:
            continue
        worse = sum(w["tunedRatio"] < w["tableRatio"] * 0.99 for w in ws)
        print(
            f"{what}: table {_gmean([w['tableRatio'] for w in ws])} -> tuned {_gmean([w['tunedRatio'] for w in ws])} "
            f"(geometric mean; min {min(w['tableRatio'] for w in ws):.3f} -> {min(w['tunedRatio'] for w in ws):.3f}; "
            f"{sum(not w['tableChosen'] for w in ws)} of {len(ws)} changed, {worse} >1% slower than the table's pick)"
        )
    return rows
