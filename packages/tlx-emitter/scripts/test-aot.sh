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
