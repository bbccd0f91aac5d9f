#!/usr/bin/env bash
# Builds the compiler that the Python package ships (ovl_runtime/_compiler/bundle/: the `ovl` CLI
# bundled into ovl.mjs with its assets), so that a wheel or an install from these sources compiles
# kernels on demand with no Node on the PATH and no clone. Run before building or installing the
# package; CI and a release run it:
#   bash packages/runtime-py/scripts/build-compiler.sh
#   pip install packages/runtime-py
# Needs the workspace installed (pnpm install). SKIP_TS_BUILD=1: the CLI is already built (CI,
# after `pnpm test`), bundle only.
set -euo pipefail
pkg="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$pkg/../.." && pwd)"
out="$pkg/src/ovl_runtime/_compiler/bundle"
cd "$root"
if [ "${SKIP_TS_BUILD:-}" != 1 ]; then
  pnpm turbo run build --filter=@ovl/cli... --output-logs=errors-only
fi
pnpm --silent --filter @ovl/cli build:bundle "$out"
# A pip build from these sources copies package data into build/ and never deletes there: an older
# bundle left in it would go into the next wheel beside the new one.
rm -rf "$pkg/build"
# The bundle must run on its own before it ships: one operator, in a scratch folder, with the
# Node that built it (CI's Node 20; the wheel's own Node runs it in scripts/check-pip-install.sh).
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
node "$out/ovl.mjs" emit ag-gemm --m 256 --n 256 --k 512 --world 2 --out "$scratch/m" >/dev/null
[ -s "$scratch/m/manifest.json" ] || { echo "build-compiler: the bundle wrote no manifest" >&2; exit 1; }
echo "build-compiler: $out ($(du -sh "$out" | cut -f1); runs under node $(node --version))"
