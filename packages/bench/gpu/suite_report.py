"""Markdown table of merged suite reports (run-suite.sh output): per case, ovl's time beside
the baselines measured in the same run, the speed-up over not overlapping and the fraction
of the perfect-overlap bound reached.

    python3 packages/bench/gpu/suite_report.py SUITE.json [SUITE.json ...]
"""

from __future__ import annotations

import json
import sys

COLLECTIVE = ("nccl-all-gather", "nccl-reduce-scatter", "nccl-all-reduce", "nccl-all-to-all")
SEQUENTIAL = ("all-gather-then-gemm", "gemm-then-reduce-scatter", "gemm-then-all-reduce", "all-to-all-then-gemm")


def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def table(merged: dict) -> list[str]:
    lines = [
        "| case | world | ovl | GEMM alone (cuBLAS) | collective alone (NCCL) | not overlapped | async-TP | speed-up over not overlapped | bound ÷ ovl | checks |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, r in sorted(merged.items(), key=lambda kv: (kv[1].get("world", 0), kv[0])):
        base = {b["name"]: b.get("ms") for b in r.get("baselines") or []}
        t = (r.get("times") or {}).get("maxMedian")
        gemm = base.get("torch-gemm")
        coll = next((base[k] for k in COLLECTIVE if k in base), None)
        seq = next((base[k] for k in SEQUENTIAL if k in base), None)
        bound = max(gemm, coll) if gemm is not None and coll is not None else None
        checks = r.get("checks") or []
        ok = sum(1 for c in checks if c.get("ok"))
        worst = max((c.get("maxRelError") or 0.0) for c in checks) if checks else None
        lines.append(
            f"| {name} | {r.get('world')} | {fmt(t)} | {fmt(gemm)} | {fmt(coll)} | {fmt(seq)} | {fmt(base.get('torch-async-tp'))} | "
            f"{'—' if t is None or seq is None else f'{seq / t:.2f}×'} | {'—' if t is None or bound is None else f'{100 * bound / t:.0f}%'} | "
            f"{ok}/{len(checks)} ok"
            + ("" if worst is None else f", max rel. err {worst:.1e}")
            + ("" if not r.get("failures") else f", failed: {r['failures'][0].get('code')}")
            + " |"
        )
    return lines


def main(paths: list[str]) -> None:
    if not paths:
        raise SystemExit(__doc__)
    for p in paths:
        merged = json.load(open(p))
        first = next(iter(merged.values()))
        extra = first.get("extra", {})
        print(f"### {p.rsplit('/', 1)[-1]}\n")
        print(
            f"Device {first.get('device')}, torch {extra.get('torch')}, triton {extra.get('triton')}, {first.get('dtype')}; "
            "times in ms, median of the timed launches per rank, max over ranks.\n"
        )
        print("\n".join(table(merged)))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
