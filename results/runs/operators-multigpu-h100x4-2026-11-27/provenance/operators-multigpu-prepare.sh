#!/usr/bin/env bash
# Compiles, where Node is (the repository built), a suite of the operators beyond AG+GEMM and GEMM+RS for
# a run on several GPUs of one host (`run-suite.sh`, one torchrun per world running every case with
# --baselines): ag-moe at MoE-1/4/5, ag-attention at Attn-1 (S 32k, causal or not), ag-gemm-silu
# (the MLP chain's first half), gemm-rs, a2a-gemm and gemm-ar (partitioned and DistFuse's tile-wise) at MLP-1,
# each at worlds 2 and 4 (the folder names carry `_w<N>_`), tuned for the H100.
#   bash packages/bench/gpu/operators-multigpu-prepare.sh [out]     (default ./out-ops-mg)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
out="${1:-$repo/out-ops-mg}"
rm -rf "$out"
mkdir -p "$out"
ovl() { node "$repo/packages/cli/dist/bin.js" "$@" >/dev/null; }
for w in 2 4; do
  # name hidden intermediate(all ranks) experts topk
  while read -r name H I E k; do
    ovl emit ag-moe --tokens 8192 --hidden "$H" --intermediate "$((I / w))" --experts "$E" --topk "$k" --world "$w" --split 2 \
      --out "$out/agmoe_${name}_w${w}_"
  done <<'SHAPES'
moe1 2048 1536 8 2
moe4 4096 2048 8 2
moe5 4096 2048 32 2
SHAPES
  ovl emit ag-attention --seq 32768 --heads 32 --head-dim 128 --world "$w" --out "$out/attn_attn1_s32k_w${w}_"
  ovl emit ag-attention --seq 32768 --heads 32 --head-dim 128 --causal --world "$w" --out "$out/attn_attn1_s32k_causal_w${w}_"
  ovl emit ag-gemm-silu --m 8192 --k 4096 --n "$((11008 / w))" --world "$w" --out "$out/silu_mlp1_w${w}_"
  ovl emit gemm-rs --shape MLP-1 --world "$w" --target h100 --out "$out/rs_mlp1_w${w}_"
  ovl emit a2a-gemm --shape MLP-1 --world "$w" --target h100 --out "$out/a2a_mlp1_w${w}_"
  ovl emit gemm-ar --shape MLP-1 --world "$w" --target h100 --out "$out/ar_mlp1_w${w}_"
  ovl emit gemm-ar --shape MLP-1 --world "$w" --target h100 --template tilewise --out "$out/ar_tilewise_mlp1_w${w}_"
  echo "wrote $out/*_w${w}_"
done
