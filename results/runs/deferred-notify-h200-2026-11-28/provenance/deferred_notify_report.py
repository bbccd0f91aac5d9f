"""cuBLAS ÷ kernel per shape and notify variant, pooled over compute_bench.py runs (geometric mean over the runs,
then over the shapes), as a Markdown table.

    python3 packages/bench/gpu/diag/deferred_notify_report.py <run.json> [<run.json> ...]

Variants are named by the label's last words: ``plain`` (the body without notifies), the emitted Triton kernel as
compiled (``as emitted``) and its ``deferred_notify_variants.py`` copies (``dn``, ``gpu``, ``dn gpu``, or ``tile``,
``gpu``, ``tile gpu``), and each TLX variant by name. Exits non-zero when a case was not checked correct.
"""

import json
import sys
from collections import defaultdict

from slot_report import gmean

VARIANT_TAGS = ("dn gpu", "tile gpu", "dn", "tile", "gpu")


def variant(label: str) -> str:
    if label.startswith("plain"):
        return "plain"
    if label.startswith("tlx"):
        return label.split()[-1]
    return next((t for t in VARIANT_TAGS if label.endswith(f" {t}")), "as emitted")


def main(paths: list[str]) -> None:
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    order: list[str] = []
    for p in paths:
        with open(p) as f:
            run = json.load(f)
        for s in run["shapes"]:
            for c in s["cases"]:
                if c.get("relErr", 0) > 0.02 or c.get("allWritten") is False:
                    raise SystemExit(f"{p}: {s['name']} {c['label']} was not correct")
                v = variant(c["label"])
                if v not in order:
                    order.append(v)
                ratios[(s["name"], v)].append(s["cublas"]["ms"] / c["ms"])
    shapes = sorted({k[0] for k in ratios})
    print(f"cuBLAS ÷ kernel, {len(paths)} runs pooled\n")
    print("| shape | " + " | ".join(order) + " |")
    print("| --- |" + " ---: |" * len(order))
    for n in shapes:
        cells = [f"{gmean(ratios[(n, v)]):.3f}" if (n, v) in ratios else "—" for v in order]
        print(f"| {n} | " + " | ".join(cells) + " |")
    means = [gmean([gmean(ratios[(n, v)]) for n in shapes if (n, v) in ratios]) for v in order]
    print("| **geometric mean** | " + " | ".join(f"**{m:.3f}**" for m in means) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
