"""Per world, delivery and shape: a GEMM+RS operator's time (the slowest rank's median, geometric mean over the
passes) in two variants and their ratio, from notify_e2e_run.sh's reports (cases named <variant>_<delivery>_mlp<k>).

    python3 packages/bench/gpu/diag/notify_e2e_report.py <results-dir> [A:B]

A:B (default tile:next) names the two variants; A ÷ B > 1 means B is faster. Exits non-zero when a report is not
correct or a case lacks a pass.
"""

import glob
import json
import os
import sys
from collections import defaultdict

from slot_report import gmean


def main(root: str, a: str, b: str) -> None:
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
    print(f"GEMM+RS operator, ms (slowest rank's median, geometric mean over {passes.pop()} passes); {a} ÷ {b} > 1: {b} is faster\n")
    print(f"| world | delivery | shape | {a} | {b} | {a} ÷ {b} |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for world in sorted({w for w, _ in times}):
        for delivery in ("ce", "sm"):
            ratios = []
            for k in range(1, 7):
                ta, tb = (times.get((world, f"{v}_{delivery}_mlp{k}")) for v in (a, b))
                if ta is None or tb is None:
                    continue
                ratios.append(gmean(ta) / gmean(tb))
                print(f"| {world[1:]} | {delivery} | MLP-{k} | {gmean(ta):.3f} | {gmean(tb):.3f} | {ratios[-1]:.3f} |")
            if ratios:
                print(f"| {world[1:]} | {delivery} | **geometric mean** | | | **{gmean(ratios):.3f}** |")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2].count(":") != 1):
        raise SystemExit(__doc__)
    pair = sys.argv[2].split(":") if len(sys.argv) == 3 else ["tile", "next"]
    main(sys.argv[1], pair[0], pair[1])
