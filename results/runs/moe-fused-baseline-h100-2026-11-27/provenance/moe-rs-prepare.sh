#!/usr/bin/env bash
# Compiles, on a machine with Node (the repository built), what moe-rs-compute.py and the one-GPU
# mode run on a GPU machine without it:
#  - <out>/<MoE-n>/<variant>: `ovl emit moe-rs` at TileLink's MoE-1…6 per-rank shapes of world 8
#    (S 8192, H 2048/4096, I/8 = 192/256, E 8/32, top-2/5): `ws-128x256x64`, the default body
#    (warp-specialised, h in block order, one notify per launch) at the default tile, and
#    `tile-128x256x64`, the per-tile-notify body `moe_gemm_scatter` (the previous default);
#  - <out>/onegpu/<case>: small moe-rs operators at worlds 2, 4 and 8 (one with experts left
#    without tokens) for the one-GPU multi-rank correctness run;
#  - <out>/multigpu/w<W>/<ws|tile>/<MoE-n>: MoE-1…6 at worlds 2 and 4 (I split over the ranks),
#    both bodies, for moe-rs-multigpu.py under torchrun.
#   bash packages/bench/gpu/moe-rs-prepare.sh [out]     (default ./out-moe)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
out="${1:-$repo/out-moe}"
ovl() { node "$repo/packages/cli/dist/bin.js" "$@" >/dev/null; }
mkdir -p "$out/onegpu"
# name hidden intermediate-per-rank experts topk
while read -r name H I E k; do
  common=(--tokens 8192 --hidden "$H" --intermediate "$I" --experts "$E" --topk "$k" --world 8 --split 2 --tile 128x256x64)
  ovl emit moe-rs "${common[@]}" --out "$out/$name/ws-128x256x64"
  ovl emit moe-rs "${common[@]}" --kernel "$repo/packages/tlx-emitter/kernels/moe_gemm_scatter.py" --out "$out/$name/tile-128x256x64"
  echo "wrote $out/$name"
done <<'SHAPES'
MoE-1 2048 192 8 2
MoE-2 2048 192 32 2
MoE-3 2048 192 32 5
MoE-4 4096 256 8 2
MoE-5 4096 256 32 2
MoE-6 4096 256 32 5
SHAPES
# name world tokens hidden intermediate experts topk split choices
while read -r name world T H I E k split choices; do
  args=(--tokens "$T" --hidden "$H" --intermediate "$I" --experts "$E" --topk "$k" --world "$world" --split "$split" ${choices:+--choices "$choices"})
  ovl emit moe-rs "${args[@]}" --tile 128x256x64 --out "$out/onegpu/$name"
  ovl emit moe-rs "${args[@]}" --tile 64x128x64 --kernel "$repo/packages/tlx-emitter/kernels/moe_gemm_scatter.py" --out "$out/onegpu/${name}_tile"
  echo "wrote $out/onegpu/$name"
done <<'CASES'
moers_w2_e8_top2 2 2048 1024 128 8 2 2
moers_w4_e32_top5 4 2048 768 96 32 5 4
moers_w8_e8_top2_sparse 8 4096 512 64 8 2 2 0,3,5
CASES
# name hidden intermediate(all ranks) experts topk
while read -r name H I E k; do
  for world in 2 4; do
    common=(--tokens 8192 --hidden "$H" --intermediate "$((I / world))" --experts "$E" --topk "$k" --world "$world" --split 2 --tile 128x256x64)
    ovl emit moe-rs "${common[@]}" --out "$out/multigpu/w$world/ws/$name"
    ovl emit moe-rs "${common[@]}" --kernel "$repo/packages/tlx-emitter/kernels/moe_gemm_scatter.py" --out "$out/multigpu/w$world/tile/$name"
  done
  echo "wrote $out/multigpu/w*/*/$name"
done <<'SHAPES'
MoE-1 2048 1536 8 2
MoE-2 2048 1536 32 2
MoE-3 2048 1536 32 5
MoE-4 4096 2048 8 2
MoE-5 4096 2048 32 2
MoE-6 4096 2048 32 5
SHAPES
