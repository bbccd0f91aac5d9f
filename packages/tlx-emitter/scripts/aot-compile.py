"""Ahead-of-time compile every kernel of emitted manifests for sm_90a, without a GPU.

Usage: python aot-compile.py MANIFEST.json [MORE.json ...]

For each kernel: load its source module, derive the Triton signature from the manifest's
argument kinds (buffers by dtype, tables, peer-pointer tables, ints, the timeout) and its
constexprs, compile for GPUTarget("cuda", 90, 32) with the kernel's num_warps/num_stages,
and check the PTX holds what the kernel is for (wgmma + TMA for GEMMs, acquire loads for
waits, release atomics for notifies, the TMA store completion before a notify after TMA
stores, NVSHMEM's put with signal linked from its device bitcode for kernels that require it). The kernels import ovl_runtime.language: the runner's src must be on PYTHONPATH.
Exits non-zero on the first failure.
"""
import json
import os
import re
import sys
import sysconfig
import time

import triton
from aot_signature import kernel_source
from triton.backends.compiler import GPUTarget

TARGET = GPUTarget("cuda", 90, 32)
WAIT = r"ld\.global\.acquire\.sys"
NOTIFY = r"atom\.[a-z0-9.]*release[a-z0-9.]*add|atom\.[a-z0-9.]*add[a-z0-9.]*release|red\.[a-z0-9.]*release[a-z0-9.]*add"
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
    "rs-reduce-rows": [WAIT, VLOAD, VSTORE],
    "ar-reduce-broadcast-rows": [WAIT, NOTIFY, VLOAD, VSTORE],
    "slot-wait": [WAIT],
    # The hierarchical GEMM+RS's sums: staged rows after their wait, the node sums notified for stage 2.
    "slab-sum": [WAIT, NOTIFY, VLOAD, VSTORE],
    # NVSHMEM's put with signal, linked from its device bitcode, after ovl's bounded wait.
    "nvshmem-push": [WAIT, r"nvshmemi_transfer_put_signal"],
    # Transformed local bodies: tensor-core MMAs, whatever loads the body itself uses.
    "local-consumer": [r"wgmma", WAIT],
    "local-producer": [r"wgmma", NOTIFY],
}




def nvshmem_device_library():
    """NVSHMEM's device bitcode (`libnvshmem_device.bc`, the nvidia-nvshmem-cu13 wheel): $NVSHMEM_LIB_DIR, else this venv's."""
    lib_dir = os.environ.get("NVSHMEM_LIB_DIR") or os.path.join(sysconfig.get_path("purelib"), "nvidia", "nvshmem", "lib")
    path = os.path.join(lib_dir, "libnvshmem_device.bc")
    if not os.path.exists(path):
        print(f"FAIL: an NVSHMEM kernel needs {path} (pip install nvidia-nvshmem-cu13==3.4.5, or set NVSHMEM_LIB_DIR)", file=sys.stderr)
        sys.exit(1)
    return path


def compile_manifest(path):
    with open(path) as f:
        manifest = json.load(f)
    base = os.path.dirname(os.path.abspath(path))
    buffers = {b["name"]: b for b in manifest["buffers"]}
    tables = {t["name"]: t for t in manifest.get("tables", [])}
    for k in manifest["kernels"]:
        t0 = time.time()
        src, _, _ = kernel_source(triton, base, k, buffers, tables, "ovl_aot_")
        options = {"num_warps": k["numWarps"], "num_stages": k["numStages"]}
        if "nvshmem" in k.get("requires", []):  # as the runner launches it: through torch's requires_nvshmem
            options["extern_libs"] = (("libnvshmem_device", nvshmem_device_library()),)
        compiled = triton.compile(src, target=TARGET, options=options)
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
