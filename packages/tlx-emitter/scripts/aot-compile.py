"""Ahead-of-time compile every kernel of emitted manifests for sm_90a, without a GPU.

Usage: python aot-compile.py MANIFEST.json [MORE.json ...]

For each kernel: load its source module, derive the Triton signature from the manifest's
argument kinds (buffers by dtype, tables, peer-pointer tables, ints, the timeout) and its
constexprs, compile for GPUTarget("cuda", 90, 32) with the kernel's num_warps/num_stages,
and check the PTX holds what the kernel is for (wgmma + TMA for GEMMs, acquire loads for
waits, release atomics for notifies, the TMA store completion before a notify after TMA
stores). The kernels import ovl_runtime.language: the runner's src must be on PYTHONPATH.
Exits non-zero on the first failure.
"""
import json
import os
import re
import sys
import time

import triton
from aot_signature import kernel_source
from triton.backends.compiler import GPUTarget

TARGET = GPUTarget("cuda", 90, 32)
WAIT = r"ld\.global\.acquire\.sys"
NOTIFY = r"atom\.[a-z0-9.]*release[a-z0-9.]*add|atom\.[a-z0-9.]*add[a-z0-9.]*release"
GEMM = [r"wgmma", r"cp\.async\.bulk\.tensor"]
# notify_slot completes the thread's bulk async (TMA) stores before its release (not `.read`).
TMA_DONE = r"cp\.async\.bulk\.wait_group 0"
# 16-byte vector accesses: memory kernels whose loads compile to scalar 16-bit loads run ~8x slower.
VLOAD = r"ld\.global(\.[a-z0-9]+)*\.v4\.b32"
VSTORE = r"st\.global(\.[a-z0-9]+)*\.v4\.b32"
EXPECT = {
    "ag-gemm-consumer": GEMM + [WAIT],
    "gemm-producer": GEMM + [NOTIFY, TMA_DONE],
    "rs-reduce": [WAIT, VLOAD, VSTORE],
    "sm-push": [WAIT, NOTIFY, VLOAD, VSTORE],
    "sm-pull": [WAIT, NOTIFY, VLOAD, VSTORE],
    "ring-reduce": [WAIT, NOTIFY, VLOAD, VSTORE],
    "ar-reduce-broadcast": [WAIT, NOTIFY, VLOAD, VSTORE],
    "slot-wait": [WAIT],
    # Transformed local bodies: tensor-core MMAs, whatever loads the body itself uses.
    "local-consumer": [r"wgmma", WAIT],
    "local-producer": [r"wgmma", NOTIFY],
}




def compile_manifest(path):
    with open(path) as f:
        manifest = json.load(f)
    base = os.path.dirname(os.path.abspath(path))
    buffers = {b["name"]: b for b in manifest["buffers"]}
    tables = {t["name"]: t for t in manifest.get("tables", [])}
    for k in manifest["kernels"]:
        t0 = time.time()
        src, _, _ = kernel_source(triton, base, k, buffers, tables, "ovl_aot_")
        compiled = triton.compile(src, target=TARGET, options={"num_warps": k["numWarps"], "num_stages": k["numStages"]})
        ptx = compiled.asm["ptx"]
        missing = [p for p in EXPECT.get(k["template"]["kind"], []) if not re.search(p, ptx)]
        where = f"{path}: {k['name']} ({k['template']['kind']})"
        if missing:
            print(f"FAIL {where}: PTX lacks {missing}", file=sys.stderr)
            sys.exit(1)
        print(f"ok   {where}: shared {compiled.metadata.shared} B, {time.time() - t0:.1f} s")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for p in sys.argv[1:]:
        compile_manifest(p)
