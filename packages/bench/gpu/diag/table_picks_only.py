"""Shrinks a compute benchmark directory to what table-check.ts reads: per shape the tuned Triton kernel and its
plain body, and the one TLX backend kernel of the table entry's `tlx` configuration (matched as table-check.ts
matches it); every other case and its files go. A payload of every TLX variant at every shape is too large to
carry to a GPU machine; the picks alone are not.

    python3 packages/bench/gpu/diag/table_picks_only.py <bench-dir> <configs/target.json>

Exits non-zero when a shape's table entry names a TLX configuration the directory does not hold.
"""

import json
import os
import shutil
import sys
from pathlib import Path

KEEP_ROLES = ("tuned", "tuned-plain")


def is_pick(case: dict, t: dict) -> bool:
    w = case.get("warpSpecialization")
    c = case["config"]
    return (
        case.get("role") == "tlx-emitted"
        and w is not None
        and (c["BM"], c["BN"], c["BK"], c["groupM"]) == (t["BM"], t["BN"], t["BK"], t["groupM"])
        and w.get("consumerSchedule") == t["consumerSchedule"]
        and w.get("stages") == t["stages"]
        and w.get("epilogueSplit") == t.get("epilogueSplit")
        and w.get("notifier") == t.get("notifier")
        and (w.get("clusterM") or 1) == (t.get("clusterM") or 1)
    )


def main(d: str, table_path: str) -> None:
    bench = json.loads(Path(d, "compute.json").read_text())
    entries = json.loads(Path(table_path).read_text())["entries"]
    used: set[str] = set()
    shapes = []
    for s in bench["shapes"]:
        e = next((x for x in entries if x.get("op", "ag-gemm") == s["op"] and (x["M"], x["N"], x["K"]) == (s["M"], s["N"], s["K"])), None)
        t = None if e is None else e.get("tlx")
        cases = [c for c in s["cases"] if c.get("role") in KEEP_ROLES or (t is not None and is_pick(c, t))]
        if t is not None and not any(c.get("role") == "tlx-emitted" for c in cases):
            raise SystemExit(f"{s['name']}: no case of the table's TLX configuration {t}")
        for c in cases:
            used.add(os.path.dirname(c["file"]) if "cubin" in c else c["file"])
        shapes.append(dict(s, cases=cases))
    removed = 0
    for sub in ("tlx", "emitted"):
        for p in sorted(Path(d, sub).glob("*")) if Path(d, sub).exists() else []:
            rel = os.path.relpath(p, d)
            if rel not in used:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
                removed += 1
    Path(d, "compute.json").write_text(json.dumps(dict(bench, shapes=shapes), indent=1))
    kept = sum(len(s["cases"]) for s in shapes)
    print(f"{d}: {kept} cases kept over {len(shapes)} shapes, {removed} files or folders removed")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
