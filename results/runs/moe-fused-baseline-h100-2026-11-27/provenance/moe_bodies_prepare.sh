#!/usr/bin/env bash
# Compiles, where Node is (the repository built), what moe_bodies.py times and checks on a GPU machine:
#  - <out>/p1/base/<MoE-n>/<tile>: `ovl emit ag-moe` (the built-in gather + grouped GEMM body at its
#    default tile and launch, and at 128x128x64) at TileLink's MoE-1…6 per-rank shapes of world 8;
#  - <out>/p2/<variant>/<MoE-n>/<tile>: `ovl emit moe-rs` of each variant of the grouped GEMM +
#    scatter body (base: the built-in file; tma_flat: weights by TMA, tile loop flattened) at its
#    default tile and launch;
#  - <out>/onegpu/<case>: small ag-moe and moe-rs operators (built-in bodies, default tiles) at
#    worlds 2, 4 and 8 for the one-GPU multi-rank correctness run.
#   bash packages/bench/gpu/diag/moe_bodies_prepare.sh [out]     (default ./out-moe-diag)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
out="${1:-$repo/out-moe-diag}"
rm -rf "$out"
mkdir -p "$out/src" "$out/onegpu"
cp "$here/moe_bodies/moe_gemm_scatter_tma.py" "$out/src/tma.py"
sed 's/tl.range(tl.program_id(0), num_tiles, NUM_SMS)/tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True)/' \
  "$out/src/tma.py" > "$out/src/tma_flat.py"
grep -q 'flatten=True' "$out/src/tma_flat.py"
ovl() { node "$repo/packages/cli/dist/bin.js" "$@" >/dev/null; }
# name hidden intermediate-per-rank experts topk
while read -r name H I E k; do
  common=(--tokens 8192 --hidden "$H" --intermediate "$I" --experts "$E" --topk "$k" --world 8 --split 2)
  ovl emit ag-moe "${common[@]}" --out "$out/p1/base/$name/128x256x64"
  ovl emit ag-moe "${common[@]}" --tile 128x128x64 --out "$out/p1/base/$name/128x128x64"
  ovl emit moe-rs "${common[@]}" --out "$out/p2/base/$name/128x256x64"
  ovl emit moe-rs "${common[@]}" --kernel "$out/src/tma_flat.py" --out "$out/p2/tma_flat/$name/128x256x64"
  echo "wrote $out/p*/*/$name"
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
  ovl emit ag-moe "${args[@]}" --out "$out/onegpu/agmoe_$name"
  ovl emit moe-rs "${args[@]}" --out "$out/onegpu/moers_$name"
  echo "wrote $out/onegpu/*_$name"
done <<'CASES'
w2_e8_top2 2 2048 1024 256 8 2 2
w4_e32_top5 4 2048 768 192 32 5 4
w8_e8_top2_sparse 8 4096 512 128 8 2 2 0,3,5
CASES
