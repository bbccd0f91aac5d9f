"""Writes delivery variants of emitted GEMM+ReduceScatter cases for ``run-suite.sh``.

From a copy-engine case ``<name>_ce_...`` it writes ``<name>_ce_free<k>`` (the producer leaving k SMs
to the driver's copies); from an SM-push case ``<name>_sm_...`` it writes
``<name>_sm_b<BLOCK>_nw<warps>_s<SMs>`` (``sm_push`` with that many programs, warps and elements per
step, the producer leaving it those SMs). The kernels' sources are copied from the base case.

    python3 rs_delivery_variants.py <suite-dir> <base-case> ce:16,24 sm:8192x8x16,16384x8x8
"""

import json
import os
import shutil
import sys


def write_variant(suite: str, base: str, name: str, edit) -> None:
    src = os.path.join(suite, base)
    dst = os.path.join(suite, name)
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f != "manifest.json" and not os.path.exists(os.path.join(dst, f)):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    with open(os.path.join(src, "manifest.json")) as fh:
        m = json.load(fh)
    edit(m)
    m["name"] = name
    with open(os.path.join(dst, "manifest.json"), "w") as fh:
        json.dump(m, fh, indent=1)
    print(f"wrote {dst}")


def producer(m: dict) -> dict:
    return next(k for k in m["kernels"] if k["stream"] == "compute")


def main() -> None:
    suite, base, *specs = sys.argv[1:]
    stem = base.split("_ce_")[0] if "_ce_" in base else base.split("_sm_")[0]
    for spec in specs:
        kind, values = spec.split(":")
        for v in values.split(","):
            if kind == "ce":
                free = int(v)

                def ce(m, free=free):
                    producer(m)["grid"][0]["reserve"] = free

                write_variant(suite, base, f"{stem}_ce_free{free}_", ce)
            else:
                block, warps, sms = (int(x) for x in v.split("x"))

                def sm(m, block=block, warps=warps, sms=sms):
                    push = next(k for k in m["kernels"] if k["name"] == "sm_push")
                    push["grid"] = [min(sms, push["template"]["params"]["segments"])]
                    push["numWarps"] = warps
                    push["constexprs"]["BLOCK"] = block
                    push["template"]["params"]["BLOCK"] = block
                    producer(m)["grid"][0]["reserve"] = sms

                write_variant(suite, base, f"{stem}_sm_b{block}_nw{warps}_s{sms}_", sm)


if __name__ == "__main__":
    main()
