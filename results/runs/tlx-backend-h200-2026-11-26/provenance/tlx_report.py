"""Markdown of a compute_bench.py result with TLX cases (emit-tlx-compute.ts): per shape, cuBLAS, the tuned
Triton kernel, the fastest plain TLX GEMM and the fastest TLX backend kernel (cuBLAS ms ÷ kernel ms), and the
geometric means.

    python3 tlx_report.py bench.json > table.md
"""

import json
import math
import statistics
import sys

REL_TOL = 2e-2


def ok(c):
    return (
        "ms" in c
        and c.get("allWritten")
        and c.get("relErr", 1) < REL_TOL
        and "waitError" not in c
    )


def best(cases, role):
    xs = [c for c in cases if c.get("role") == role and ok(c)]
    return min(xs, key=lambda c: c["ms"]) if xs else None


def ratio(cub, c):
    """cuBLAS ms ÷ the case's ms (nan without a case)."""
    return cub / c["ms"] if c else float("nan")


def variant(c):
    """The configuration a TLX case's label ends with."""
    return c["label"].split()[-1] if c else "-"


with open(sys.argv[1]) as f:
    r = json.load(f)
print(
    f"{r['device']}, torch {r['torch']}, triton {r['triton']}, CUDA {r['cuda']}; {r['method']}\n"
)
print(
    "| shape | M×N×K | cuBLAS ms | tuned Triton ÷ | fastest plain TLX ÷ (variant) | fastest TLX backend ÷ (variant) | faster of tuned and TLX backend ÷ |"
)
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
cols = {"tuned": [], "tlx": [], "tlx-emitted": [], "faster": []}
for s in r["shapes"]:
    cub = s["cublas"]["ms"]
    t, p, e = (
        best(s["cases"], "tuned"),
        best(s["cases"], "tlx"),
        best(s["cases"], "tlx-emitted"),
    )
    faster = cub / min(x["ms"] for x in (t, e) if x) if (t or e) else float("nan")
    for k, v in (
        ("tuned", ratio(cub, t)),
        ("tlx", ratio(cub, p)),
        ("tlx-emitted", ratio(cub, e)),
        ("faster", faster),
    ):
        if not math.isnan(v):
            cols[k].append(v)
    print(
        f"| {s['name']} | {s['M']}×{s['N']}×{s['K']} | {cub:.4f} | {ratio(cub, t):.3f} | {ratio(cub, p):.3f} ({variant(p)}) | {ratio(cub, e):.3f} ({variant(e)}) | {faster:.3f} |"
    )
print()
for k, label in (
    ("tuned", "tuned Triton kernel (the table's entry)"),
    ("tlx", "fastest plain TLX GEMM"),
    ("tlx-emitted", "fastest TLX backend kernel (waits / notifies in)"),
    ("faster", "faster of the tuned Triton and the TLX backend kernel"),
):
    xs = cols[k]
    if xs:
        print(
            f"- {label}: geometric mean {statistics.geometric_mean(xs):.3f}, min {min(xs):.3f}, {sum(x < 0.95 for x in xs)} of {len(xs)} below 0.95"
        )
