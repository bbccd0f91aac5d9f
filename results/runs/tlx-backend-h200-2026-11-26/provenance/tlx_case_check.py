"""Launch every precompiled case of some shapes of a compute.json once, each in its own process
(an illegal instruction poisons the CUDA context of its process only), and print which pass.

    PYTHONPATH=packages/runtime-py/src:packages/bench/gpu python3 tlx_case_check.py DIR SHAPE[,SHAPE] [LABEL-PREFIX]
"""

import json
import subprocess
import sys


def one(base, shape_name, label):
    import compute_bench as cb
    import torch
    import triton

    with open(f"{base}/compute.json") as f:
        bench = json.load(f)
    shape = next(s for s in bench["shapes"] if s["name"] == shape_name)
    case = next(c for c in shape["cases"] if c["label"] == label)
    triton.set_allocator(cb.allocator)
    M, N, K = shape["M"], shape["N"], shape["K"]
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    go, err = cb.launcher(
        base, case, a, b, c, torch.cuda.get_device_properties(0).multi_processor_count
    )
    for _ in range(int(sys.argv[5]) if len(sys.argv) > 5 else 1):
        go()
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    rel = float((c.float() - ref).norm() / ref.norm())
    print(
        f"ok   {shape_name} {label}: relErr {rel:.2e} nan {bool(torch.isnan(c).any())} err {err.tolist() if err is not None else '-'}"
    )


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        one(sys.argv[2], sys.argv[3], sys.argv[4])
        sys.exit(0)
    base, shapes = sys.argv[1], sys.argv[2].split(",")
    prefix = sys.argv[3] if len(sys.argv) > 3 else ""
    with open(f"{base}/compute.json") as f:
        bench = json.load(f)
    for s in bench["shapes"]:
        if s["name"] not in shapes:
            continue
        for c in s["cases"]:
            if "cubin" not in c or not c["label"].startswith(prefix):
                continue
            p = subprocess.run(
                [sys.executable, __file__, "--one", base, s["name"], c["label"], "20"],
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
            )
            tail = (p.stdout + p.stderr).strip().splitlines()
            print(
                tail[-1]
                if p.returncode == 0
                else f"FAIL {s['name']} {c['label']}: {[l for l in tail if 'Error' in l][-1:] or tail[-1:]}",
                flush=True,
            )
