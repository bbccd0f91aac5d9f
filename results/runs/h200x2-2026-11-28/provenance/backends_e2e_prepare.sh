#!/usr/bin/env bash
# Where Node is (the repository built): AllGather+GEMM and GEMM+RS at MLP-1…6, world 2, each as the Triton
# backend's operator (`<op>tri_mlp<k>_w2_`) and the TLX backend's (`<op>tlx_mlp<k>_w2_`, the tuned table's TLX
# configuration for the target, AOT-compiled), both delivering by the copy engine, for backends_e2e_run.sh.
#   bash packages/bench/gpu/diag/backends_e2e_prepare.sh [out] [target]     (default ./out-h2s, h200)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../../.." && pwd)"
out="${1:-$repo/out-h2s}"
target="${2:-h200}"
rm -rf "$out"
mkdir -p "$out"
for k in 1 2 3 4 5 6; do
  for op in ag-gemm:ag gemm-rs:rs; do
    node "$repo/packages/cli/dist/bin.js" emit "${op%%:*}" --shape "MLP-$k" --world 2 --tlx --target "$target" \
      --out "$out/${op#*:}tri_mlp${k}_w2_" >/dev/null
    mv "$out/${op#*:}tri_mlp${k}_w2_/tlx" "$out/${op#*:}tlx_mlp${k}_w2_"
  done
done
ls "$out"/*tlx*/manifest.json | PYTHONPATH="$repo/packages/runtime-py/src" xargs -P 6 -n 1 \
  "$repo/packages/tlx-emitter/.venv-tlx/bin/python" "$repo/packages/tlx-emitter/scripts/tlx-aot-compile.py"
echo "wrote $out: $(ls -d "$out"/*_w2_ | wc -l) cases"
