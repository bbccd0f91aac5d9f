"""Adds, to every shape of a compute benchmark directory, a second copy of its first case and of its
first TLX case at the end of the list (labelled ``... again``: the same kernel, file and arguments).

    python3 packages/bench/gpu/diag/position_probe.py <bench-dir>

With ``compute_bench.py --order fixed`` each copy is timed at the other end of every round from its
original; with ``--order shuffled`` both take random places. The ratio of the two copies' times is
what a place in the round costs (1.0 when it costs nothing).
"""

import json
import sys
from pathlib import Path


def main(d: str) -> None:
    path = Path(d, "compute.json")
    bench = json.loads(path.read_text())
    added = 0
    for s in bench["shapes"]:
        firsts = [s["cases"][0]]
        tlx = next((c for c in s["cases"] if "cubin" in c), None)
        if tlx is not None and tlx is not firsts[0]:
            firsts.append(tlx)
        for c in firsts:
            s["cases"].append(dict(c, label=f"{c['label']} again", role="alternative"))
            added += 1
    path.write_text(json.dumps(bench, indent=1))
    print(f"{added} copies added over {len(bench['shapes'])} shapes of {path}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
