#!/usr/bin/env bash
# Compiles, where Node is (the repository built), ag-moe at MoE-1/4/5 for worlds 2 and 4 twice over — the
# compiler's default (the non-persistent body at the tuned configuration: `agmoe_*`) and the persistent body
# at 128x256x64 (`agmoep_*`) — for `run-suite.sh` on several GPUs (each case with --baselines).
#   bash packages/bench/gpu/moe-multigpu-prepare.sh [out]     (default ./out-moe-mg)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
out="${1:-$repo/out-moe-mg}"
rm -rf "$out"
mkdir -p "$out"
ovl() { node "$repo/packages/cli/dist/bin.js" "$@" >/dev/null; }
for w in 2 4; do
  # name hidden intermediate(all ranks) experts topk
  while read -r name H I E k; do
    flags=(--tokens 8192 --hidden "$H" --intermediate "$((I / w))" --experts "$E" --topk "$k" --world "$w" --split 2)
    ovl emit ag-moe "${flags[@]}" --target h100 --out "$out/agmoe_${name}_w${w}_"
    ovl emit ag-moe "${flags[@]}" --kernel "$repo/packages/tlx-emitter/kernels/moe_gather_gemm.py" --tile 128x256x64 \
      --out "$out/agmoep_${name}_w${w}_"
  done <<'SHAPES'
moe1 2048 1536 8 2
moe4 4096 2048 8 2
moe5 4096 2048 32 2
SHAPES
done
echo "wrote $out"
