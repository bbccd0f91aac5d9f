"""The fused-MoE comparison's tables (markdown) from ``moe_fused_run.sh``'s JSON: per MoE shape, the emitted
kernel beside the fastest ``fused_moe`` configuration and ``torch._grouped_mm``, each case's runs pooled by
their median (robust to one run's outlier).

    python3 packages/bench/gpu/diag/moe_fused_report.py --bodies a/moe-bodies-run1.json,a/moe-bodies-run2.json \\
        --emitted wrapn [--rs a/moe-rs-compute-run1.json,a/moe-rs-compute-run2.json]

``--emitted`` names the folder of ``out-moe-diag/p1`` whose ag-moe kernels are the emitted ones to report
(``base`` where moe_bodies_prepare.sh alone made them). Needs no GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def pooled(files: list[Path]) -> dict[str, dict[str, float]]:
    """shape -> case -> the median of the runs' medians (ms); a case missing from a run is left out."""
    runs = [{r["shape"]: r["cases"] for r in json.loads(f.read_text())["rows"]} for f in files]
    out: dict[str, dict[str, float]] = {}
    for shape in runs[0]:
        names = set.intersection(*(set(run.get(shape, {})) for run in runs))
        out[shape] = {n: statistics.median(run[shape][n]["ms"] for run in runs) for n in names}
    return out


def fastest(cases: dict[str, float], prefix: str, suffix: str = "") -> tuple[str, float]:
    named = [k for k in cases if k.startswith(prefix) and k.endswith(suffix)]
    if not named:
        return "-", float("nan")
    k = min(named, key=cases.__getitem__)
    return k[len(prefix) :].strip(), cases[k]


def part1(files: list[Path], emitted: str) -> None:
    print("| shape | emitted ag-moe (ms) | plain body (ms) | fastest fused_moe | ms | emitted's speed ÷ fused_moe's | `_grouped_mm` ms | emitted's speed ÷ `_grouped_mm`'s |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for shape, c in pooled(files).items():
        em = c.get(f"p1 {emitted} emitted 128x256x64 w8 s4", float("nan"))
        plain = c.get("p1 base 128x256x64 w8 s4", float("nan"))
        fcfg, fms = fastest(c, "p1 fused_moe")
        gm = c.get("p1 grouped_mm", float("nan"))
        print(f"| {shape} | {em:.4f} | {plain:.4f} | {fcfg} | {fms:.4f} | {fms / em:.3f} | {gm:.4f} | {gm / em:.2f} |")


def part2(files: list[Path]) -> None:
    print("| shape | emitted moe-rs producer (ms) | fastest fused_moe | ms | emitted's speed ÷ fused_moe's | chain (ms) | fused_moe + topk-sum (ms) | chain's speed ÷ theirs | `_grouped_mm` + scatter + topk-reduce (ms) |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for shape, c in pooled(files).items():
        _, em = fastest(c, "emitted ")
        fcfg, fms = fastest({k: v for k, v in c.items() if not k.endswith("+topk-sum")}, "fused_moe")
        _, fsum = fastest(c, "fused_moe", "+topk-sum")
        _, chain = fastest(c, "emitted+permute+topksum+notify")
        base = c.get("grouped_mm+scatter+topk-reduce", float("nan"))
        print(f"| {shape} | {em:.4f} | {fcfg} | {fms:.4f} | {fms / em:.2f} | {chain:.4f} | {fsum:.4f} | {fsum / chain:.2f} | {base:.4f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bodies", default="", help="comma-separated moe_bodies.py JSON (part 1)")
    p.add_argument("--emitted", default="base", help="the p1 folder of the emitted kernels to report")
    p.add_argument("--rs", default="", help="comma-separated moe-rs-compute.py JSON (part 2)")
    args = p.parse_args()
    if args.bodies:
        part1([Path(f) for f in args.bodies.split(",")], args.emitted)
    if args.rs:
        print()
        part2([Path(f) for f in args.rs.split(",")])


if __name__ == "__main__":
    main()
