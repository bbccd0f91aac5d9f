#!/usr/bin/env bash
# Compiles, on a machine with Node (the repository built), what attention-gpu.sh runs on a GPU
# machine without it:
#  - <out>/bench_s<S>_h<H>[_causal]: ag-attention at TileLink's Attn-1 / Attn-2 per-rank shapes
#    of world 8 (32 / 64 heads, head dim 128, S = 16k ... 128k, 128x64 blocks, swizzle, split 2),
#    timed by attention-compute.py --emitted with every chunk slot already signalled;
#  - <out>/onegpu/<case>: small ag-attention cases at worlds 2, 4 and 8 (causal GQA and
#    non-causal MHA, ring and swizzle) for the one-GPU multi-rank correctness run.
#   bash packages/bench/gpu/attention-prepare.sh [out]     (default ./out-attn)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
out="${1:-$repo/out-attn}"
ovl() { node "$repo/packages/cli/dist/bin.js" "$@" >/dev/null; }
mkdir -p "$out/onegpu"
for S in 16384 32768 65536 131072; do
  for H in 32 64; do
    for causal in "" "--causal"; do
      name="bench_s$((S / 1024))k_h$H${causal:+_causal}"
      ovl emit ag-attention --seq "$S" --heads "$H" --head-dim 128 $causal --world 8 --split 2 --template swizzle --tile 128x64 --out "$out/$name"
      echo "wrote $out/$name"
    done
  done
done
# name world S heads kv-heads head-dim template causal
while read -r name world S H G D template causal; do
  ovl emit ag-attention --seq "$S" --heads "$H" --kv-heads "$G" --head-dim "$D" ${causal:+--causal} --world "$world" --split 2 \
    --template "$template" --tile 64x64 --out "$out/onegpu/$name"
  echo "wrote $out/onegpu/$name"
done <<'CASES'
attn_w2_swizzle_causal_gqa 2 2048 8 2 128 swizzle 1
attn_w2_ring_mha 2 2048 8 8 64 ring
attn_w4_ring_causal_gqa 4 4096 16 4 128 ring 1
attn_w4_swizzle_mha 4 4096 8 8 128 swizzle
attn_w8_swizzle_causal_gqa 8 8192 32 8 128 swizzle 1
attn_w8_ring_causal_mha 8 8192 16 16 64 ring 1
attn_w8_swizzle_gqa 8 8192 32 4 128 swizzle
CASES
