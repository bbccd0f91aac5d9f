"""Ahead-of-time compile the TLX kernels of emitted manifests with fbtriton, no GPU.

Usage: python tlx-aot-compile.py MANIFEST.json [MORE.json ...]

For each kernel with a `precompiled` entry: load its source module, derive the Triton
signature from the manifest's argument kinds (scripts/aot_signature.py), compile
for the entry's target (sm_90a: GPUTarget("cuda", 90, 32); sm_100a: GPUTarget("cuda", 100,
32)), write the cubin and a metadata JSON next to the manifest at the paths the manifest
names, and check that the PTX is for that target (`.target`) and holds what the kernel is
for: the patterns of `expect.json` beside the manifest (wgmma or tcgen05 MMAs, mbarrier
waits, bulk tensor copies, acquire loads for chunk waits, release adds for remote arrivals,
cluster launch control), and not the other target's MMA. The metadata's argument layout is
checked against the PTX entry's parameters. The kernels import their device primitives
from ovl_runtime.language: the runner's src must be on PYTHONPATH. Exits non-zero on failure.
"""
import json
import os
import re
import sys
import time

import triton
from aot_signature import kernel_source
from triton.backends.compiler import GPUTarget

TARGETS = {"sm_90a": GPUTarget("cuda", 90, 32), "sm_100a": GPUTarget("cuda", 100, 32)}
# How the launcher packs each Triton type: pointers as u64, i32 as 4 bytes, i64 as 8.
PACK = {"i32": "i32", "i64": "i64"}
# Controls that the check can fail: a kernel without fused communication has no acquire wait.
ABSENT = {"tlx-gemm": [r"ld\.global\.acquire\.sys"]}
# Nor may a kernel hold the other target's MMA: Hopper kernels no tcgen05, Blackwell ones no wgmma.
ABSENT_BY_TARGET = {"sm_90a": [r"tcgen05\."], "sm_100a": [r"wgmma\.mma_async"]}
PTX_PARAM = re.compile(r"\.param\s+\.(u64|u32|b32|s32|b64|s64)(\s+\.ptr[^,\n]*)?\s+(\w+)")




def ptx_params(ptx, entry):
    """The entry's parameters in the PTX, as (ptx type, is pointer)."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(([^)]*)\)", ptx)
    if m is None:
        raise SystemExit(f"FAIL: no .entry {entry} in the PTX")
    return [(t, bool(p)) for t, p, _ in PTX_PARAM.findall(m.group(1))]


def metadata_of(kernel, compiled, signature, aligned, target):
    md = compiled.metadata
    args = []
    for a in kernel["args"]:
        t = signature[a["name"]]
        args.append({"name": a["name"], "type": t, "pack": "ptr" if t.startswith("*") else PACK[t], "value": a["value"]})
    # Triton appends two pointer parameters to every kernel: the global scratch (device-side
    # TMA descriptors live there, `global_scratch_size` bytes per program) and the profile scratch.
    hidden = [
        {"name": "global_scratch", "pack": "ptr", "bytes_per_program": md.global_scratch_size, "align": md.global_scratch_align},
        {"name": "profile_scratch", "pack": "ptr", "bytes_per_program": md.profile_scratch_size, "align": md.profile_scratch_align},
    ]
    return {
        "$schema": "ovl.cubin-metadata/v1",
        "entry": md.name,
        "target": target,
        "shared": md.shared,
        "num_warps": md.num_warps,
        "threads_per_block": md.num_warps * md.warp_size,
        "num_ctas": md.num_ctas,
        "cluster_dims": list(md.cluster_dims),
        "launch_cluster": bool(getattr(md, "launch_cluster", False)),
        "tmem_size": getattr(md, "tmem_size", 0),
        "args": args,
        # Compiled assuming these are multiples of 16 (pointers: 16-byte aligned); the
        # launcher refuses values that are not.
        "aligned": list(aligned),
        "hidden_args": hidden,
        "triton_version": getattr(md, "triton_version", triton.__version__),
        "hash": md.hash,
    }


def check_layout(meta, params, where):
    packs = [a["pack"] for a in meta["args"]] + [h["pack"] for h in meta["hidden_args"]]
    want = [("ptr" if p else {"u64": "i64", "b64": "i64", "s64": "i64"}.get(t, "i32")) for t, p in params]
    if packs != want:
        raise SystemExit(f"FAIL {where}: argument layout {packs} does not match the PTX entry {want}")


def compile_manifest(path):
    with open(path) as f:
        manifest = json.load(f)
    base = os.path.dirname(os.path.abspath(path))
    expect_path = os.path.join(base, "expect.json")
    expect = json.load(open(expect_path)) if os.path.exists(expect_path) else {}
    buffers = {b["name"]: b for b in manifest["buffers"]}
    tables = {t["name"]: t for t in manifest.get("tables", [])}
    done = 0
    for k in manifest["kernels"]:
        pre = k.get("precompiled")
        if pre is None:
            continue
        where = f"{path}: {k['name']} ({k['template']['kind']})"
        t0 = time.time()
        src, signature, aligned = kernel_source(triton, base, k, buffers, tables, "ovl_tlx_aot_")
        options = {"num_warps": k["numWarps"], "num_stages": k["numStages"]}
        if "cluster" in pre:
            # A cluster kernel (CTAs sharing loads by TMA multicast): compiled for that cluster shape.
            options["ctas_per_cga"] = tuple(pre["cluster"])
        compiled = triton.compile(src, target=TARGETS[pre["target"]], options=options)
        ptx = compiled.asm["ptx"]
        if not re.search(r"^\s*\.target\s+" + re.escape(pre["target"]) + r"\b", ptx, re.M):
            raise SystemExit(f"FAIL {where}: the PTX is not for {pre['target']}")
        patterns = expect.get(k["name"], [])
        if not patterns:
            raise SystemExit(f"FAIL {where}: expect.json names no PTX patterns for it")
        missing = [p for p in patterns if not re.search(p, ptx)]
        if missing:
            raise SystemExit(f"FAIL {where}: PTX lacks {missing}")
        present = [p for p in ABSENT.get(k["template"]["kind"], []) + ABSENT_BY_TARGET[pre["target"]] if re.search(p, ptx)]
        if present:
            raise SystemExit(f"FAIL {where}: PTX unexpectedly holds {present}")
        meta = metadata_of(k, compiled, signature, aligned, pre["target"])
        if meta["cluster_dims"] != list(pre.get("cluster", [1, 1, 1])):
            raise SystemExit(f"FAIL {where}: compiled for clusters {meta['cluster_dims']}, the manifest asks {pre.get('cluster')}")
        check_layout(meta, ptx_params(ptx, meta["entry"]), where)
        with open(os.path.join(base, pre["cubin"]), "wb") as f:
            f.write(compiled.asm["cubin"])
        with open(os.path.join(base, pre["metadata"]), "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")
        done += 1
        print(f"ok   {where} {pre['target']}: {meta['num_warps']} warps, shared {meta['shared']} B, tmem {meta['tmem_size']} cols, "
              f"cubin {len(compiled.asm['cubin'])} B, {len(patterns)} PTX checks, {time.time() - t0:.1f} s")
    if done == 0:
        raise SystemExit(f"FAIL {path}: no precompiled kernel in it")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for p in sys.argv[1:]:
        compile_manifest(p)
