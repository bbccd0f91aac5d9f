"""Checks the tile-done slots of every emitted TLX GEMM+RS case of a compute benchmark directory after one launch.

    PYTHONPATH=packages/runtime-py/src python3 packages/bench/gpu/diag/rs_variant_slots.py <bench-dir>

For each emitted case (the hand-edited variants of ``rs_epilogue_variants.py`` included): fresh
signals at their initial value, one launch, then every slot must have grown by exactly the tiles
that notify it (the notify table per m-block times the n-tiles) and the output must match ``A @ B`` (fp32 reference, bf16 tolerance). Prints one
line per case and exits non-zero when any case is wrong. Variants that drop the notify on purpose
(label ending ``noatom``) are expected to leave every slot where it was.
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from compute_bench import cubin_launcher


def expected_counts(shape: dict, case: dict) -> dict[int, int]:
    table = next(a for a in case["args"] if a["kind"] == "table" and a["name"] in ("notify_ptr", "ovl_notify0"))
    per = -(-shape["N"] // case["config"]["BN"])
    counts: dict[int, int] = {}
    for v in table["values"]:
        if v >= 0:
            counts[v] = counts.get(v, 0) + per
    return counts


def main(d: str) -> int:
    bench = json.loads(Path(d, "compute.json").read_text())
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    bad = 0
    for s in bench["shapes"]:
        M, N, K = s["M"], s["N"], s["K"]
        torch.manual_seed(0)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        ref = (a.float() @ b.float())
        for case in s["cases"]:
            if case["kind"] != "emitted" or "cubin" not in case or not any(x["kind"] == "signals" for x in case["args"]):
                continue
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            go, _ = cubin_launcher(d, case, a, b, c, sms)
            sig = go.keep[1][next(x["name"] for x in case["args"] if x["kind"] == "signals")]
            before = sig.clone()
            go()
            torch.cuda.synchronize()
            grown = (sig - before).tolist()
            want = [0] * len(grown)
            if not case["label"].endswith("noatom"):
                for slot, n in expected_counts(s, case).items():
                    want[slot] = n
            err = ((c.float() - ref).abs() / (ref.abs() + 1.0)).max().item()
            ok = grown == want and err < 0.05
            bad += not ok
            diff = [(i, g, w) for i, (g, w) in enumerate(zip(grown, want)) if g != w][:4]
            print(f"{'ok ' if ok else 'BAD'} {s['name']:12s} {case['label']:45s} slots {len(grown)} (total {sum(grown)}/{sum(want)}) "
                  f"max rel err {err:.3g}{'' if not diff else f' first wrong (slot, got, want) {diff}'}", flush=True)
    print(f"{bad} wrong" if bad else "all correct")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1]))
