"""Adds the stream-K tail prototype (``stream_k_tail_prototype.py``) to compute benchmarks.

    python3 packages/bench/gpu/diag/stream_k_tail_cases.py <bench-dir> [<bench-dir> ...]

Each ``<bench-dir>`` is a compute benchmark with the plain TLX GEMM ``tlx/coop128x256s4q`` (``emit-compute.ts
bench`` plus ``emit-tlx-compute.ts --variants coop128x256s4q,...``). This writes ``tlx/sk128x256s4q`` (the
prototype, ``STREAM_K`` 1) and ``tlx/sk0128x256s4q`` (``STREAM_K`` 0: every tile whole, the structure's
cost alone), each with its manifest (the plain kernel's, plus the fp32 partials and int32 counts), and
adds a ``tlx sk…`` case beside every ``tlx coop128x256s4q`` case of ``compute.json``. Compile the new
manifests with ``scripts/tlx-aot-compile.py`` before carrying the directories.
"""

import copy
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = "coop128x256s4q"
# Slots: two partial tiles per program, at most 132 programs (the SMs of an H100 or H200).
PROGRAMS = 132
PARTIALS = 2 * PROGRAMS * 128 * 256
# Counts: one per shared tile (at most two waves) and consumer.
COUNTS = 2 * PROGRAMS * 2
VARIANTS = {"sk128x256s4q": 1, "sk0128x256s4q": 0}


def write_variant(d: str, name: str, stream_k: int) -> None:
    src, dst = f"{d}/tlx/{BASE}", f"{d}/tlx/{name}"
    os.makedirs(dst, exist_ok=True)
    shutil.copy(f"{HERE}/stream_k_tail_prototype.py", f"{dst}/tlx_gemm.py")
    shutil.copy(f"{src}/expect.json", f"{dst}/expect.json")
    with open(f"{src}/manifest.json") as f:
        m = json.load(f)
    m["buffers"] += [
        {
            "dtype": "fp32",
            "init": "zeros",
            "name": "sk_partials",
            "shape": [PARTIALS],
            "symmetric": False,
        },
        {
            "dtype": "int32",
            "init": "zeros",
            "name": "sk_counts",
            "shape": [COUNTS],
            "symmetric": False,
        },
    ]
    k = m["kernels"][0]
    k["args"] = (
        k["args"][:3]
        + [
            {
                "name": "partials_ptr",
                "value": {"kind": "buffer", "name": "sk_partials"},
            },
            {"name": "counts_ptr", "value": {"kind": "buffer", "name": "sk_counts"}},
        ]
        + k["args"][3:]
    )
    k["constexprs"]["STREAM_K"] = stream_k
    with open(f"{dst}/manifest.json", "w") as f:
        json.dump(m, f, indent=2)


def add_cases(d: str) -> None:
    with open(f"{d}/compute.json") as f:
        bench = json.load(f)
    for s in bench["shapes"]:
        s["cases"] = [c for c in s["cases"] if not c["label"].startswith("tlx sk")]
        base = [c for c in s["cases"] if c["label"] == f"tlx {BASE}"]
        if len(base) != 1:
            raise SystemExit(f"{d}: shape {s['name']} has no tlx {BASE} case")
        for name in VARIANTS:
            n = copy.deepcopy(base[0])
            n["label"] = f"tlx {name}"
            for field in ("file", "cubin", "metadata"):
                n[field] = n[field].replace(f"/{BASE}/", f"/{name}/")
            n["config"]["body"] = "tlx-cooperative-stream-k"
            a = n["args"]
            n["args"] = (
                a[:3]
                + [
                    {
                        "name": "partials_ptr",
                        "kind": "zeros",
                        "dtype": "fp32",
                        "size": PARTIALS,
                    },
                    {
                        "name": "counts_ptr",
                        "kind": "zeros",
                        "dtype": "int32",
                        "size": COUNTS,
                    },
                ]
                + a[3:]
            )
            s["cases"].append(n)
    with open(f"{d}/compute.json", "w") as f:
        json.dump(bench, f, indent=1)


def main(dirs: list[str]) -> None:
    for d in dirs:
        for name, stream_k in VARIANTS.items():
            write_variant(d, name, stream_k)
        add_cases(d)
        print(f"{d}: {', '.join(VARIANTS)} added")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
