#!/usr/bin/env bash
# GPU side of ag-moe's compute benchmarks (after moe_blocks_prepare.mjs, carrying out-moe-blocks, out-kern
# and out-deps). WHAT lists what runs:
#   blocks   moe_blocks.py RUNS times (moe-blocks-run<i>.json): the tuned and persistent emitted kernels,
#            the non-persistent body at every configuration (emitted and plain), fused_moe, _grouped_mm;
#   waits    moe_wait_variants.py: the emitted kernel's waits, variant by variant;
#   onegpu   every rank on this GPU: `python -m ovl_runtime run --ranks-on-one-gpu` of out-moe-blocks/onegpu,
#            and the torch API's MoE GPU tests on the kernels prebuilt into out-kern
#            (OVL_CLI="node $PWD/packages/cli/dist/bin.js" python packages/runtime-py/tests_gpu/test_moe_gpu.py --prepare out-kern).
# Logs in $OUT/logs.tgz (the machine returns few files).
#   WHAT="blocks onegpu" RUNS=2 bash packages/bench/gpu/diag/moe_blocks_run.sh
set -uo pipefail
repo="$(cd "$(dirname "$0")/../../../.." && pwd)"
out="${OUT:-$repo/out-moe-blocks-run}"
logs="$out/logs"
mkdir -p "$logs"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$out/device.txt"
export PYTHONPATH="$repo/packages/runtime-py/src:$repo/out-deps"
cd "$repo/packages/bench/gpu/diag"
for what in ${WHAT:-blocks onegpu}; do
  case "$what" in
    blocks)
      for run in $(seq 1 "${RUNS:-1}"); do
        timeout 300 python3 moe_blocks.py --emitted "$repo/out-moe-blocks" --out "$out/moe-blocks-run$run.json" > "$logs/moe-blocks-run$run.log" 2>&1
        echo "moe_blocks run $run rc=$?"; tail -n 45 "$logs/moe-blocks-run$run.log"
      done ;;
    waits)
      timeout 540 python3 moe_wait_variants.py --emitted "$repo/out-moe-blocks" --out "$out/moe-wait-variants.json" > "$logs/moe-wait-variants.log" 2>&1
      echo "moe_wait_variants rc=$?"; tail -n 60 "$logs/moe-wait-variants.log" ;;
    onegpu)
      (cd "$repo" && timeout 200 python3 -m ovl_runtime run --ranks-on-one-gpu out-moe-blocks/onegpu/agmoe_*/manifest.json --epochs 3 --out-dir "$logs/onegpu" > "$logs/onegpu.log" 2>&1)
      echo "ag-moe one-GPU rc=$?"; tail -n 6 "$logs/onegpu.log"
      (cd "$repo" && OVL_KERNELS="$repo/out-kern" timeout 200 python3 -m pytest -q -p no:cacheprovider packages/runtime-py/tests_gpu/test_moe_gpu.py > "$logs/pytest-moe.log" 2>&1)
      echo "tests_gpu/test_moe_gpu.py rc=$?"; tail -n 3 "$logs/pytest-moe.log" ;;
    *) echo "unknown WHAT: $what" >&2; exit 2 ;;
  esac
done
tar czf "$out/logs.tgz" -C "$out" logs && rm -r "$logs"
