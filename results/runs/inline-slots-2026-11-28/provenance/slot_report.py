"""Reads what ag_slot_variants.py and position_probe.py measured.

    python3 packages/bench/gpu/diag/slot_report.py slots <run.json> [<run.json> ...]
    python3 packages/bench/gpu/diag/slot_report.py position <run.json> [<run.json> ...]

``slots``: per AllGather+GEMM shape, cuBLAS ÷ kernel (each case at the geometric mean of its ratios over
the runs) for the best of the TLX variants as plain GEMMs, as the TLX backend emits them (slots inline),
with the slot loaded from a table, and without any wait; then the tuned Triton kernel inline and from
the table, and the faster backend either way; geometric means last.
``position``: per run, the time of each case's first copy ÷ its ``again`` copy's, geometric mean and
range, Triton and TLX cases apart (1.0: a place in the round costs nothing).
"""

import json
import math
import sys

VARIANTS = ("coop128x256s3e1", "coop128x256s4", "pp128x128s5e1", "pp128x128s6", "coop256x128s4")
COLUMNS = {"plain": "tlx {}", "inline": "tlx emitted {}", "table": "tlx emitted {} table", "nowait": "tlx emitted {} nowait"}


def gmean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def slots(paths):
    rows = {}
    for p in paths:
        for s in json.load(open(p))["shapes"]:
            for c in s["cases"]:
                if "ms" in c:
                    rows.setdefault(s["name"], {}).setdefault(c["label"], []).append(s["cublas"]["ms"] / c["ms"])
    print(f"{'shape':12} " + " ".join(f"{k:>7}" for k in COLUMNS) + "  triton  tri-tab  faster  fast-tab")
    cols = {k: [] for k in (*COLUMNS, "triton", "tri-tab", "faster", "fast-tab")}
    for name, d in rows.items():
        r = {k: max(gmean(d[f.format(v)]) for v in VARIANTS) for k, f in COLUMNS.items()}
        r["triton"] = max(gmean(v) for k, v in d.items() if k.startswith("emitted ") and not k.endswith(" table"))
        r["tri-tab"] = max(gmean(v) for k, v in d.items() if k.startswith("emitted ") and k.endswith(" table"))
        r["faster"], r["fast-tab"] = max(r["triton"], r["inline"]), max(r["tri-tab"], r["table"])
        for k, v in r.items():
            cols[k].append(v)
        print(f"{name:12} " + " ".join(f"{v:7.3f}" for v in r.values()))
    print(f"{'gmean':12} " + " ".join(f"{gmean(v):7.3f}" for v in cols.values()))


def position(paths):
    for p in paths:
        ratios = {"triton": [], "tlx": []}
        for s in json.load(open(p))["shapes"]:
            by = {c["label"]: c for c in s["cases"] if "ms" in c}
            for label, again in by.items():
                if label.endswith(" again"):
                    first = by[label[: -len(" again")]]
                    ratios["tlx" if label.startswith("tlx") else "triton"].append(first["ms"] / again["ms"])
        print(
            p,
            "  ".join(f"{k} {gmean(v):.4f} [{min(v):.3f}, {max(v):.3f}]" for k, v in ratios.items() if v),
        )


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("slots", "position"):
        raise SystemExit(__doc__)
    (slots if sys.argv[1] == "slots" else position)(sys.argv[2:])
