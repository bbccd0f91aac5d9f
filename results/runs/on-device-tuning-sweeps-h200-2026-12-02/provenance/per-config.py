# Each configuration's ratio (cuBLAS ms / kernel ms, within a sweep, median over all sweeps) at every whole-GPU shape
# it was timed at, in each call: which configurations hold across shapes. Run in this folder after
# `tar -xJf raw.tar.xz`, with the runtime's sources on PYTHONPATH.
import json
import sys
from collections import defaultdict

from ovl_runtime._tune.select import relative

for call in ("call1", "call2"):
    d = json.load(open(f"{call}/tune-bench.json"))
    by = defaultdict(dict)
    for s in d["shapes"]:
        if s.get("reserve"):
            continue
        for c in s["cases"]:
            if "sweepsMs" in c:
                by[c["label"].removeprefix("emitted ")][s["name"]] = 1 / relative([s["cublas"]["sweepsMs"], c["sweepsMs"]])[1]
    for label, v in sorted(by.items(), key=lambda x: -len(x[1])):
        if len(v) >= 4:
            print(call, f"{label:45s}", len(v), " ".join(f"{k}={x:.3f}" for k, x in v.items()))
sys.exit(0)
