"""The summary of a tune run of compute_bench.py: per shape the table's pick (what the torch API binds today) and the
on-device tuner's pick, each as cuBLAS's time over its own (1.0: cuBLAS's speed) in the same run.

The pick is made as the runtime's tuner makes it — its own rule, ``ovl_runtime._tune.select.choose`` (the table's
pick unless another candidate measured more than ``min_gain`` faster), on each candidate's time over cuBLAS's in the
same sweep (``ovl_runtime._tune.select.relative``), medians over the first half of the sweeps — and both picks are
then reported on the second half. A pick reported on the sweeps it was made on would carry the winner's curse (the
luckiest of eight noisy medians); this does not. A producer timed beside its push kernel is also reported against
cuBLASLt on the same SMs (torch's SM carveout). Pure Python (the results' numbers): no torch.
"""

from __future__ import annotations

import statistics
from typing import Any

from ovl_runtime._tune.select import choose, relative
from ovl_runtime._tune.settings import TuneSettings


def _ok(c: dict[str, Any]) -> bool:
    return "sweepsMs" in c and bool(c.get("allWritten")) and c.get("relErr", 1.0) < 2e-2 and "waitError" not in c


def tune_rows(result: dict[str, Any], min_gain: float = TuneSettings.min_gain) -> list[dict[str, Any]]:
    """Per measured shape: the table pick's and the tuned pick's ratios (cuBLAS's time over theirs, within each sweep of
    the report half, medians), the best candidate's, cuBLASLt on the same SMs where the grid is cut, what was picked and
    why."""
    out = []
    for r in result["shapes"]:
        sweeps = r["cublas"].get("sweepsMs", [])
        half = len(sweeps) // 2
        if half < 1:
            continue
        cases = r["cases"]
        ok = [_ok(c) for c in cases]
        members = [sweeps, *(c["sweepsMs"] if k else [] for c, k in zip(cases, ok))]
        pick_rel = relative(members, part=slice(None, half))[1:]
        report_rel = relative(members, part=slice(half, None))[1:]
        row: dict[str, Any] = {
            "name": r["name"],
            "op": r["op"],
            "control": bool(r.get("control")),
            "grid": "whole GPU" if not r.get("reserve") else f"SMs - {r['reserve']}",
            "cublasMs": statistics.median(sweeps[half:]),
            "table": cases[0]["label"] if cases else None,
        }
        same = r.get("cublasSameSms")
        if same is not None:
            row["sameSms"] = relative([sweeps, same["sweepsMs"]], part=slice(half, None))[1]
            row["carveout"] = same.get("overLtWholeGpu")
        try:
            c = choose(pick_rel, min_gain)
        except Exception as exc:  # noqa: BLE001 - no candidate correct at this shape: reported as such
            out.append({**row, "error": str(exc)})
            continue
        inv = lambda x: None if x is None else 1 / x  # noqa: E731 - relative time -> ratio to cuBLAS
        best = min((t for t in report_rel if t is not None), default=None)
        out.append(
            {
                **row,
                "tableRatio": inv(report_rel[0]),
                "tunedRatio": inv(report_rel[c.index]),
                "bestRatio": inv(best),
                # Beside the push kernel: against cuBLAS given the same SMs (its time over the case's).
                **({"tunedRatioSameSms": row["sameSms"] / report_rel[c.index]} if "sameSms" in row and report_rel[c.index] else {}),
                "chosen": cases[c.index]["label"],
                "chosenSource": cases[c.index].get("source", ""),
                "tableChosen": c.index == 0,
                "reason": c.reason,
                "candidates": len(cases),
                "correct": sum(t is not None for t in report_rel),
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
        f"{'shape':28s} {'grid':>9s} {'table':>6s} {'tuned':>6s} {'gain':>6s} {'best':>6s} {'=SMs':>6s}  chosen (source)   "
        "ratios: cuBLAS ms / kernel ms within a sweep, second half of the sweeps; =SMs: against cuBLASLt on the same SMs"
    )
    for w in rows:
        if "error" in w:
            print(f"{w['name']:28s} {w['grid']:>9s} {w['error']}")
            continue
        gain = w["tunedRatio"] / w["tableRatio"] - 1 if w["tunedRatio"] and w["tableRatio"] else None
        chosen = "= table pick" if w["tableChosen"] else f"{w['chosen'].removeprefix('emitted ')} ({w['chosenSource']})"
        tag = " [control]" if w["control"] else ""
        print(
            f"{w['name'] + tag:28s} {w['grid']:>9s} {fmt(w['tableRatio'])} {fmt(w['tunedRatio'])} "
            f"{f'{100 * gain:+5.1f}%' if gain is not None else '     -'} {fmt(w['bestRatio'])} {fmt(w.get('tunedRatioSameSms'))}  {chosen}"
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
        same = [w["tunedRatioSameSms"] for w in ws if w.get("tunedRatioSameSms")]
        if same:
            carve = _gmean([w["carveout"] for w in ws if w.get("carveout")])
            print(
                f"{what}, against cuBLASLt on the same SMs: tuned {_gmean(same)} (geometric mean; min {min(same):.3f}); "
                f"cuBLASLt on those SMs takes {carve} of its whole-GPU time"
            )
    return rows
