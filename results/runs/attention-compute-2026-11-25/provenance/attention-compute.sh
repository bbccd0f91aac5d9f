#!/usr/bin/env bash
# The flash-attention body of ag-attention beside SDPA (flash) on this machine's GPU, at
# TileLink's Attn-1/Attn-2 per-rank shapes of world 8; extra arguments go to the script
# (e.g. --seqs 16384 --heads 32, or --emitted out-attn/* for the overlapped kernels).
#   bash packages/bench/gpu/attention-compute.sh [args...]     (JSON in $OUT, default ./out-attn)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
export PYTHONPATH="$repo/packages/runtime-py/src:$repo/out-deps${PYTHONPATH:+:$PYTHONPATH}"
out="${OUT:-$repo/out-attn}"
mkdir -p "$out"
exec python3 "$repo/packages/bench/gpu/attention-compute.py" --out "$out/attention-compute.json" "$@"
