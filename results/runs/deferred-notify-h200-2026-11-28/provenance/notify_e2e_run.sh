#!/usr/bin/env bash
# On a host of $WORLDS' largest number of GPUs (carry $SUITE, default out-e2e, and out-deps): GEMM+RS operators
# whose producer notifies each tile at its end (`tile_<delivery>_mlp<k>/`) or a tile later (`next_...`, as
# `ovl emit` compiles it since notifyAt "next-tile"), copy engine and SM pushes, MLP-1…6, under one torchrun per
# world and pass (`ovl_runtime run`: 3 checked epochs, the slowest rank's median of 20 launches), $PASSES passes
# (default 3), the order reversed every second pass. Reports to $OUT/results.tgz (pass<p>/w<world>/<case>.json, log.txt).
#   suite: for each world, delivery and shape `ovl emit gemm-rs ... --out $SUITE/w<world>/next_<ce|sm>_mlp<k>`, a copy
#   as tile_..., its producer reverted with deferred_notify_variants.immediate.
set -uo pipefail
suite=${SUITE:-out-e2e}
. "$(dirname "$0")/torchrun_pass.sh"
res=$(mktemp -d)
trap 'nvidia-smi --query-gpu=clocks.current.sm,power.draw,temperature.gpu --format=csv >> "$res/device.txt"; tar czf "$OUT/results.tgz" -C "$res" .' EXIT
{
  nvidia-smi --query-gpu=name,driver_version,clocks.current.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$res/device.txt"
for p in $(seq 1 "${PASSES:-3}"); do
  for w in ${WORLDS:-2 4}; do
    mapfile -t fwd < <(ls -d "$suite"/w"$w"/*/ | sed 's#/$#/manifest.json#')
    torchrun_pass "pass $p world $w" "$p" "$w" "${PASS_S:-200}" "$res/pass$p/w$w" -- "${fwd[@]}"
  done
done
