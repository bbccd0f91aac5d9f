#!/usr/bin/env bash
# On a 2-GPU host (carry the prepared folder and out-deps): every case of $SUITE (default out-h2s, from
# backends_e2e_prepare.sh) under one torchrun per pass (`ovl_runtime run --baselines`: 3 checked epochs, the
# slowest rank's median of 20 launches, then cuBLAS, NCCL, the two in sequence and PyTorch async-TP in the same
# process), $PASSES passes (default 4), the order reversed every second pass so that no backend always runs
# first. Reports go to $OUT/results.tgz (pass<p>/<case>.json and log.txt), the device state to $OUT/device.txt.
set -uo pipefail
suite=${SUITE:-out-h2s}
. "$(dirname "$0")/torchrun_pass.sh"
res=$(mktemp -d)
trap 'nvidia-smi --query-gpu=clocks.current.sm,power.draw,temperature.gpu --format=csv >> "$OUT/device.txt"; tar czf "$OUT/results.tgz" -C "$res" .' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.current.sm,power.limit,temperature.gpu --format=csv > "$OUT/device.txt"
mapfile -t fwd < <(ls -d "$suite"/*_w2_/ | sed 's#/$#/manifest.json#')
for p in $(seq 1 "${PASSES:-4}"); do
  torchrun_pass "pass $p" "$p" 2 140 "$res/pass$p" --baselines -- "${fwd[@]}"
done
