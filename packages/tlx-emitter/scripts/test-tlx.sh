#!/usr/bin/env bash
# AOT check of the TLX kernels for sm_90a (and the sm_100a GEMMs), no GPU needed: makes .venv-tlx (fbtriton 3.7.4,
# Meta's Triton fork with TLX; it installs the module `triton`, so it gets its own venv)
# when missing, emits the TLX examples into a temp dir and compiles every kernel, writing
# cubin + metadata and checking the PTX (scripts/tlx-aot-compile.py).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/.venv-tlx"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import triton.language.extra.tlx" 2>/dev/null; then
  echo "creating $venv (pip install fbtriton==3.7.4 numpy)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet fbtriton==3.7.4 numpy
fi
out="${OVL_TLX_OUT:-$(mktemp -d)}"
[ -z "${OVL_TLX_OUT:-}" ] && trap 'rm -rf "$out"' EXIT
mkdir -p "$out"
cd "$here"
npx --no-install tsx scripts/tlx-emit-examples.ts "$out" > /dev/null
# The kernels import their device primitives from ovl_runtime.language: the runner's sources go on PYTHONPATH.
export PYTHONPATH="$here/../runtime-py/src${PYTHONPATH:+:$PYTHONPATH}"
# Triton's cache, kept between runs (git-ignored): its keys hash everything a compile reads (the
# kernel's source and every device function it calls, the signature, constexprs, options, target,
# and the fork's own sources), so a kernel changed in any way recompiles and only an identical
# one is reused; unchanged kernels are not compiled again on every run. OVL_AOT_CACHE overrides it.
export TRITON_CACHE_DIR="${OVL_AOT_CACHE:-$here/.triton-aot-cache}/tlx"
"$venv/bin/python" scripts/tlx-aot-compile.py "$out"/*/manifest.json
