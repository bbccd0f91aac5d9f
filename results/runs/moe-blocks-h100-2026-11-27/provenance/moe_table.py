"""Write ag-moe's tuned entries into a compute-configuration table (``packages/tlx-emitter/configs/<target>.json``)
from ``diag/moe_blocks.py`` runs: per MoE shape, the configuration whose emitted kernel (waits in, every slot
already at its target) had the lowest median over the runs given, with the fastest fused-MoE kernel's median
in the same runs (``fusedMoeMs``). Other operators' entries are kept; earlier ag-moe entries are replaced.

    python3 packages/bench/gpu/moe_table.py packages/tlx-emitter/configs/h100.json \\
        packages/bench/results/gpu/moe-blocks-h100-2026-11-27/vector-waits/moe-blocks.json [more runs ...]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

#: moe_blocks.py's emitted case names: "p1 blocks emitted 128x256x64 g8 w8 s4".
CASE = re.compile(r"^p1 blocks emitted (\d+)x(\d+)x(\d+) g(\d+) w(\d+) s(\d+)$")


def entries(runs: list[dict]) -> list[dict]:
    """One entry per shape: the emitted configuration with the lowest median over ``runs``."""
    by_shape: dict[str, list[dict]] = {}
    for run in runs:
        for row in run["rows"]:
            by_shape.setdefault(row["shape"], []).append(row)
    out = []
    for shape, rows in by_shape.items():
        names = set.intersection(*(set(r["cases"]) for r in rows))
        med = {n: statistics.median(r["cases"][n]["ms"] for r in rows) for n in names}
        emitted = {n: ms for n, ms in med.items() if CASE.match(n)}
        fused = [ms for n, ms in med.items() if n.startswith("p1 fused_moe ")]
        if not emitted or not fused:
            raise SystemExit(f"{shape}: the runs hold no emitted or no fused_moe case timed in all of them")
        best = min(emitted, key=emitted.__getitem__)
        bm, bn, bk, g, w, s = (int(x) for x in CASE.match(best).groups())
        r = rows[0]
        out.append(
            {
                "op": "ag-moe",
                "M": r["S"],
                "N": r["I_per_rank"],
                "K": r["H"],
                "experts": r["E"],
                "topk": r["topk"],
                "dtype": "bf16",
                "body": "moe_gather_gemm_blocks",
                "BM": bm,
                "BN": bn,
                "BK": bk,
                "groupM": g,
                "numStages": s,
                "numWarps": w,
                "ms": round(emitted[best], 4),
                "fusedMoeMs": round(min(fused), 4),
            }
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("table", type=Path)
    p.add_argument("runs", type=Path, nargs="+")
    p.add_argument("--source", default=None, help="what the table's source field says of the ag-moe entries (default: the runs' paths)")
    args = p.parse_args()
    table = json.loads(args.table.read_text())
    new = entries([json.loads(r.read_text()) for r in args.runs])
    table["entries"] = [e for e in table["entries"] if e["op"] != "ag-moe"] + new
    src = args.source or ", ".join(str(r) for r in args.runs)
    table["source"] = re.sub(r"; [^;]*\(ag-moe\)$", "", table["source"]) + f"; {src} (ag-moe)"
    args.table.write_text(json.dumps(table, indent=2) + "\n")
    for e in new:
        print(
            f"{e['M']}x{e['N']}x{e['K']} E{e['experts']} top{e['topk']}: {e['BM']}x{e['BN']}x{e['BK']} g{e['groupM']} w{e['numWarps']} s{e['numStages']}  {e['ms']} ms (fused_moe {e['fusedMoeMs']})"
        )


if __name__ == "__main__":
    main()
