"""Per world, delivery and shape: the GEMM+RS operator's time (the slowest rank's median, geometric mean over the
passes) with the producer notifying each tile at its end and a tile later, from notify_e2e_run.sh's reports.

    python3 packages/bench/gpu/diag/notify_e2e_report.py <results-dir>

Exits non-zero when a report is not correct or a case lacks a pass.
"""

import glob
import json
import math
import os
import sys
from collections import defaultdict


def gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main(root: str) -> None:
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for f in sorted(glob.glob(os.path.join(root, "pass*", "w*", "*.json"))):
        with open(f) as fh:
            report = json.load(fh)
        if not report.get("ok"):
            raise SystemExit(f"{f}: not correct")
        times[(os.path.basename(os.path.dirname(f)), os.path.basename(f)[: -len(".json")])].append(report["times"]["maxMedian"])
    passes = {len(v) for v in times.values()}
    if len(passes) != 1:
        raise SystemExit(f"cases ran {sorted(passes)} passes")
    print(
        f"GEMM+RS operator, ms (slowest rank's median, geometric mean over {passes.pop()} passes); tile ÷ next-tile > 1: a tile later is faster\n"
    )
    print("| world | delivery | shape | tile | next-tile | tile ÷ next-tile |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for world in sorted({w for w, _ in times}):
        for delivery in ("ce", "sm"):
            ratios = []
            for k in range(1, 7):
                tile, later = (times.get((world, f"{v}_{delivery}_mlp{k}")) for v in ("tile", "next"))
                if tile is None or later is None:
                    continue
                ratios.append(gmean(tile) / gmean(later))
                print(f"| {world[1:]} | {delivery} | MLP-{k} | {gmean(tile):.3f} | {gmean(later):.3f} | {ratios[-1]:.3f} |")
            if ratios:
                print(f"| {world[1:]} | {delivery} | **geometric mean** | | | **{gmean(ratios):.3f}** |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
