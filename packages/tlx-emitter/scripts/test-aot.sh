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
# NVSHMEM's device bitcode for the nvshmem-push kernels (31 MB of the ~80 MB wheel; 3.4.5 is what torch 2.11 pins).
if ! "$venv/bin/python" -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path('purelib'), 'nvidia/nvshmem/lib/libnvshmem_device.bc')))"; then
  echo "installing nvidia-nvshmem-cu13==3.4.5 into $venv" >&2
  "$venv/bin/pip" install --quiet --no-deps nvidia-nvshmem-cu13==3.4.5
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$here"
npx --no-install tsx scripts/emit-examples.ts "$out" > /dev/null
# A private cache so a stale kernel from another run cannot pass for this one.
export TRITON_CACHE_DIR="$out/.triton-cache"
export PYTHONPATH="$here/../runtime-py/src${PYTHONPATH:+:$PYTHONPATH}"
"$venv/bin/python" scripts/aot-compile.py "$out"/*/manifest.json "$out"/*/kernels.json
