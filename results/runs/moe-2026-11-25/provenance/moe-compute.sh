#!/usr/bin/env bash
# The gather + grouped GEMM body of ag-moe and its device routing kernels beside torch._grouped_mm
# on this machine's GPU, at TileLink's MoE-1…6 per-rank shapes of world 8; extra arguments go to
# the script (e.g. --shapes MoE-1,MoE-4 --reps 50).
#   bash packages/bench/gpu/moe-compute.sh [args...]     (JSON in $OUT, default ./out-moe)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
export PYTHONPATH="$repo/packages/runtime-py/src:$repo/out-deps${PYTHONPATH:+:$PYTHONPATH}"
out="${OUT:-$repo/out-moe}"
mkdir -p "$out"
exec python3 "$repo/packages/bench/gpu/moe-compute.py" --out "$out/moe-compute.json" "$@"
