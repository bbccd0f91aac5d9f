"""Per shape of a compute_bench.py result: cuBLAS ms ÷ kernel ms of each TLX configuration as plain GEMM,
as the TLX backend emits it, and as each diagnostic edit of the emitted kernel (role `diag`, the edit
named last in its label: noorder = m-blocks in visit order, nonotify = no tile-done notifies, nowait =
no chunk waits, noslot = no chunk-slot load, bare = neither order nor slot load, gpu-scope = notifies
released at gpu scope)."""

import json
import sys

with open(sys.argv[1]) as f:
    r = json.load(f)
for s in r["shapes"]:
    cub = s["cublas"]["ms"]
    cells = {}
    for c in s["cases"]:
        if "ms" not in c or not c.get("allWritten") or c.get("relErr", 1) > 2e-2:
            continue
        words = c["label"].split()
        if c.get("role") == "tlx":
            cells.setdefault(words[-1], {})["plain"] = cub / c["ms"]
        elif c.get("role") == "tlx-emitted":
            cells.setdefault(words[-1], {})["emitted"] = cub / c["ms"]
        elif c.get("role") == "diag":
            cells.setdefault(words[-2], {})[words[-1]] = cub / c["ms"]
    for v, row in sorted(cells.items()):
        print(
            f"{s['name']:12s} {v:16s} "
            + "  ".join(f"{k} {x:.3f}" for k, x in row.items())
        )
