#!/usr/bin/env bash
# AOT check of the emitted kernels for sm_90a, no GPU needed: makes .venv-triton (upstream
# triton 3.6.0) when missing, emits the example manifests into a temp dir, compiles every
# kernel and checks its PTX (scripts/aot-compile.py). The kernels import their device
# primitives from ovl_runtime.language: the runner's sources go on PYTHONPATH (not installed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/.venv-triton"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import triton" 2>/dev/null; then
  echo "creating $venv (pip install triton==3.6.0 numpy)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet triton==3.6.0 numpy
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$here"
npx --no-install tsx scripts/emit-examples.ts "$out" > /dev/null
# A private cache so a stale kernel from another run cannot pass for this one.
export TRITON_CACHE_DIR="$out/.triton-cache"
export PYTHONPATH="$here/../runtime-py/src${PYTHONPATH:+:$PYTHONPATH}"
"$venv/bin/python" scripts/aot-compile.py "$out"/*/manifest.json "$out"/*/kernels.json
