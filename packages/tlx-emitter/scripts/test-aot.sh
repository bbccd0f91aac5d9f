#!/usr/bin/env bash
# AOT check of the emitted kernels for sm_90a, no GPU needed: uses the runner's venv
# (packages/runtime-py/.venv, whose interpret extra is upstream triton 3.6.0; made on first use
# by its scripts/python-env.sh, so triton is downloaded once for both packages), emits the
# example manifests into a temp dir, compiles every kernel and checks its PTX
# (scripts/aot-compile.py). The kernels import their device primitives from
# ovl_runtime.language: the runner's sources go on PYTHONPATH.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="$(bash "$here/../runtime-py/scripts/python-env.sh")"
# NVSHMEM's device bitcode for the nvshmem-push kernels: torch 2.11 depends on nvidia-nvshmem-cu13 3.4.5, so the
# runner's venv has it already; installed here only if a venv lacks it (31 MB of the ~80 MB wheel).
if ! "$python" -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path('purelib'), 'nvidia/nvshmem/lib/libnvshmem_device.bc')))"; then
  echo "installing nvidia-nvshmem-cu13==3.4.5 into the runner's venv" >&2
  "$python" -m pip install --quiet --no-deps nvidia-nvshmem-cu13==3.4.5
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$here"
npx --no-install tsx scripts/emit-examples.ts "$out" > /dev/null
# Triton's cache, kept between runs (git-ignored): its keys hash everything a compile reads (the
# kernel's source and every device function it calls, the signature, constexprs, options, target,
# and Triton's own sources), so a kernel changed in any way recompiles and only an identical
# one is reused; unchanged kernels are not compiled again on every run. OVL_AOT_CACHE overrides it.
export TRITON_CACHE_DIR="${OVL_AOT_CACHE:-$here/.triton-aot-cache}/triton"
export PYTHONPATH="$here/../runtime-py/src${PYTHONPATH:+:$PYTHONPATH}"
"$python" scripts/aot-compile.py "$out"/*/manifest.json "$out"/*/kernels.json
