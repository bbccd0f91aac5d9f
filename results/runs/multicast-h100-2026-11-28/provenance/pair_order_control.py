"""A control for the clustered TLX GEMM: its pair order of tiles without the cluster or the multicast.

    python3 packages/bench/gpu/diag/pair_order_control.py <bench-dir> [<bench-dir> ...]

Each ``<bench-dir>`` is a compute benchmark (``emit-compute.ts bench`` plus ``emit-tlx-compute.ts
--variants mc128x256s4q,mc128x256s4qg16 --no-emitted``). For each of the two clustered plain TLX GEMMs
(``tlx/mc128x256s4q*``) this writes a copy ``tlx/po128x256s4q*`` that walks the same pairs of m-blocks
— each CTA takes ``cta = program_id % 2`` as the rank it would have in its cluster — but launches
without clusters, loads its whole B block itself and releases only its own ring stages; and adds a
``tlx po…`` case beside every ``tlx mc…`` case of ``compute.json``. What the clustered kernel gains over
its own control is the multicast's, not the order's. Compile the new manifests with
``scripts/tlx-aot-compile.py`` before carrying the directories; the launch grid must be even (the SM
count of an H100 or H200).
"""

import copy
import json
import os
import re
import sys

VARIANTS = ("mc128x256s4q", "mc128x256s4qg16")


def control_source(k: str) -> str:
    """The clustered kernel's source made its unclustered control (each edit checked to apply)."""
    edits = [
        ("block_shape=[BLOCK_K, HALF_N])", "block_shape=[BLOCK_K, BLOCK_N])"),
        ("arrive_count=NUM_CONSUMERS * CLUSTER_M)", "arrive_count=NUM_CONSUMERS)"),
        ("cta = tlx.cluster_cta_rank()", "cta = tl.program_id(0) % 2"),
    ]
    for old, new in edits:
        if old not in k:
            raise SystemExit(f"the clustered kernel has no {old!r}: emitted by another version?")
        k = k.replace(old, new)
    k, n = re.subn(
        r"\n( +)if cta == 0:\n +tlx\.async_descriptor_load\(b_desc.*\n +else:\n +tlx\.async_descriptor_load\(b_desc.*\n",
        r"\n\1tlx.async_descriptor_load(b_desc, tlx.local_view(b_ring, stage), [ki * BLOCK_K, offs_bn], full)\n",
        k,
    )
    if n != 1:
        raise SystemExit("the multicast B loads were not found exactly once")
    k = re.sub(r"\n +tlx\.barrier_arrive\(tlx\.local_view\(empty_bars, prev\), 1, remote_cta_rank=peer\)", "", k)
    for gone in ("multicast_targets", "remote_cta_rank", "cluster_cta_rank"):
        if gone in k:
            raise SystemExit(f"{gone} is still in the control")
    return k


def main(dirs: list[str]) -> None:
    for d in dirs:
        for v in VARIANTS:
            src, dst = f"{d}/tlx/{v}", f"{d}/tlx/{v.replace('mc', 'po', 1)}"
            os.makedirs(dst, exist_ok=True)
            with open(f"{src}/tlx_gemm.py") as f:
                text = control_source(f.read())
            with open(f"{dst}/tlx_gemm.py", "w") as f:
                f.write(text)
            with open(f"{src}/manifest.json") as f:
                m = json.load(f)
            del m["kernels"][0]["precompiled"]["cluster"]
            with open(f"{dst}/manifest.json", "w") as f:
                json.dump(m, f, indent=2)
            with open(f"{src}/expect.json") as f:
                e = json.load(f)
            keep = {n: [p for p in ps if "multicast" not in p and "shared::cluster" not in p] for n, ps in e.items()}
            with open(f"{dst}/expect.json", "w") as f:
                json.dump(keep, f, indent=2)
        with open(f"{d}/compute.json") as f:
            bench = json.load(f)
        for s in bench["shapes"]:
            s["cases"] = [c for c in s["cases"] if not c["label"].startswith("tlx po")]
            added = []
            for c in s["cases"]:
                v = c["label"].split()[1]
                if not (c["label"].startswith("tlx mc") and v in VARIANTS):
                    continue
                n = copy.deepcopy(c)
                po = v.replace("mc", "po", 1)
                n["label"] = f"tlx {po}"
                for field in ("file", "cubin", "metadata"):
                    n[field] = n[field].replace(f"/{v}/", f"/{po}/")
                n["config"]["body"] = "tlx-cooperative-pair-order"
                n["warpSpecialization"] = {k: x for k, x in n["warpSpecialization"].items() if k != "clusterM"}
                added.append(n)
            s["cases"] += added
        with open(f"{d}/compute.json", "w") as f:
            json.dump(bench, f, indent=1)
        print(f"{d}: pair-order controls of {', '.join(VARIANTS)} added")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
