"""Per case of backends_e2e_run.sh's passes: the operator's slowest-rank median and the same process's
cuBLAS-then-NCCL sequence and PyTorch async-TP (medians over the passes), the sequence ÷ operator per pass and
its geometric mean, and per operator and backend the geometric mean over the shapes; then TLX ÷ Triton
operator time per shape. Refuses a report whose checks failed.

    python3 packages/bench/gpu/diag/backends_e2e_report.py <folder with pass1/ pass2/ ...>
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from slot_report import gmean


def main(root: Path) -> None:
    rows: dict[str, list[tuple[float, float, float]]] = {}
    for f in sorted(root.glob("pass*/*.json")):
        r = json.loads(f.read_text())
        if not r["ok"]:
            raise SystemExit(f"{f}: the operator's checks failed")
        b = {x["name"]: x["ms"] for x in r["baselines"]}
        seq = b.get("all-gather-then-gemm", b.get("gemm-then-reduce-scatter"))
        rows.setdefault(f.stem, []).append((r["times"]["maxMedian"], seq, b["torch-async-tp"]))
    print(
        "| case | passes | operator (ms) | GEMM then collective (ms) | async-TP (ms) | sequence ÷ operator per pass | geometric mean |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for k, v in sorted(rows.items()):
        per = [s / o for o, s, _ in v]
        med = [statistics.median(x[i] for x in v) for i in range(3)]
        print(
            f"| {k} | {len(v)} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} | {' · '.join(f'{x:.2f}' for x in per)} | {gmean(per):.3f} |"
        )
    print()
    for op in ("ag", "rs"):
        for be in ("tri", "tlx"):
            ks = [k for k in rows if k.startswith(op + be)]
            if not ks:
                continue
            seq = gmean([gmean([s / o for o, s, _ in rows[k]]) for k in ks])
            atp = gmean([gmean([a / o for o, _, a in rows[k]]) for k in ks])
            print(f"{op} {be}: over {len(ks)} shapes the sequence ÷ operator {seq:.3f}, async-TP ÷ operator {atp:.3f}")
        pairs = sorted(k for k in rows if k.startswith(op + "tri") and k.replace("tri", "tlx", 1) in rows)
        ratio = [
            statistics.median(x[0] for x in rows[k.replace("tri", "tlx", 1)]) / statistics.median(x[0] for x in rows[k])
            for k in pairs
        ]
        if ratio:
            print(
                f"{op}: TLX ÷ Triton operator time per shape "
                + " ".join(f"{k.split('_')[1]} {x:.3f}" for k, x in zip(pairs, ratio))
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
