"""Splits the gap between the plain TLX GEMM and the TLX backend's AllGather+GEMM kernel: its wait-slot map.

    python3 packages/bench/gpu/diag/ag_slot_variants.py <bench-dir> <table-dir> [shape,shape,...]

``<bench-dir>`` and ``<table-dir>`` are two AllGather+GEMM compute benchmarks (``emit-compute.ts bench
--target h100 --ops ag-gemm`` plus ``emit-tlx-compute.ts --variants ...``) of one table and one set of TLX
variants: the first emitted where each m-block's chunk slot is printed inline (one expression over
(m-block, rank), none on the rank's own chunk), the second at a commit whose kernels still load it from
the table ``mblock_wait_slot`` (the Triton consumer from ``ovl_wait0``). Keeps the named shapes (default
all) of ``<bench-dir>`` and adds to each:

- ``table``: ``<table-dir>``'s tuned Triton kernel and TLX backend kernels (the slot loaded per tile), their
  files copied under ``<bench-dir>/table/``.
- ``nowait``: hand-edited copies of ``<bench-dir>``'s TLX backend kernels with no slot read and no wait
  at all (timing only: they do not wait for the rows they load): what any wait costs.

TLX copies go without their cubins: compile ``<bench-dir>``'s manifests (``table/`` and the ``_nowait``
folders included) with ``scripts/tlx-aot-compile.py`` before carrying the directory.
"""

import json
import os
import re
import shutil
import sys
from pathlib import Path

from variant_cases import load_bench, variant_case, write_bench

WAIT_BLOCK = re.compile(
    r"\n +slot = [^\n]*\n"
    r" +bit = tl\.where\(slot < 32[^\n]*\n"
    r" +if \(slot >= 0\) & \(\(waited & bit\) == 0\):\n"
    r"(?: +[^\n]*\n){3}"
)


def no_wait(src: str) -> str:
    out, n = WAIT_BLOCK.subn("\n", src)
    assert n == 1, f"nowait: {n}"
    return out


def drop_wait_ptx(expect: dict) -> dict:
    return {k: [p for p in v if "acquire" not in p and "fence" not in p] for k, v in expect.items()}


def table_case(d: str, table_dir: str, case: dict) -> dict:
    """``case`` of ``table_dir`` copied under ``d/table/`` (its folder, or its one file), labelled ``table``."""
    src = Path(table_dir, case["file"])
    rel = os.path.join("table", case["file"])
    dst = Path(d, rel)
    if case.get("cubin"):
        if not dst.parent.exists():
            shutil.copytree(src.parent, dst.parent, ignore=shutil.ignore_patterns("*.cubin", "*.sm_90a.json", "*.ptx"))
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    v = dict(case, label=f"{case['label']} table", role="alternative")
    for k in ("file", "cubin", "metadata"):
        if case.get(k):
            v[k] = os.path.join("table", case[k])
    return v


def main(d: str, table_dir: str, names: set[str] | None) -> None:
    bench = json.loads(Path(d, "compute.json").read_text())
    every = {s["name"] for s in bench["shapes"]}
    _, selected = load_bench(d, names or every)
    old = {s["name"]: s for s in json.loads(Path(table_dir, "compute.json").read_text())["shapes"]}
    shapes = []
    for s in selected:
        cases = list(s["cases"])
        for c in old[s["name"]]["cases"]:
            if c.get("role") in ("tuned", "tlx-emitted"):
                cases.append(table_case(d, table_dir, c))
        for c in s["cases"]:
            if c.get("role") == "tlx-emitted":
                cases.append(variant_case(d, c, "nowait", no_wait, drop_wait_ptx))
        shapes.append(dict(s, cases=cases))
    write_bench(d, bench, shapes)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], set(sys.argv[3].split(",")) if len(sys.argv) == 4 else None)
