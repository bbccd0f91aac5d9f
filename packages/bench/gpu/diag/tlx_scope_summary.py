"""Per shape of a compute_bench.py result: cuBLAS ÷ each TLX case (plain, emitted with system-scope notifies,
emitted with gpu-scope notifies: role `diag`), to tell what the emitted kernel's notifies cost."""

import json
import sys

r = json.load(open(sys.argv[1]))
for s in r["shapes"]:
    cub = s["cublas"]["ms"]
    row = {}
    for c in s["cases"]:
        if "ms" not in c or not c.get("allWritten") or c.get("relErr", 1) > 2e-2:
            continue
        role = c.get("role")
        variant = c["label"].split()[-2] if role == "diag" else c["label"].split()[-1]
        row[(role, variant)] = cub / c["ms"]
    variants = sorted({v for (_, v) in row})
    cells = [
        f"{v}: {row.get(('tlx', v), float('nan')):.3f}/{row.get(('tlx-emitted', v), float('nan')):.3f}/{row.get(('diag', v), float('nan')):.3f}"
        for v in variants
    ]
    print(f"{s['name']:12s} " + "  ".join(cells))
print(
    "cells: plain / emitted (sys-scope notify) / emitted (gpu-scope notify), cuBLAS ms ÷ kernel ms"
)
