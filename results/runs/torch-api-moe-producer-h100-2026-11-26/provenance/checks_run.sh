#!/usr/bin/env bash
# One GPU call after moe_producer_run.sh: the one-GPU multi-rank check of small ag-moe / moe-rs
# operators (built-in bodies, default tiles), the torch API's GPU tests of the MoE operators and of
# the tensor-parallel operators (kernels prebuilt into out-kern by each test file's --prepare), and
# on an H200 the compute benchmark of every MLP per-rank GEMM for the h200 table; logs under $OUT.
#   OVL_CLI="node $PWD/packages/cli/dist/bin.js" python packages/runtime-py/tests_gpu/<test>.py --prepare out-kern
set -u
out="${OUT:?set OUT}"
export PYTHONPATH="$PWD/packages/runtime-py/src:$PWD/out-deps"
name="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$out/device.txt"
timeout 150 python3 -m ovl_runtime run --ranks-on-one-gpu out-moe-diag/onegpu/*/manifest.json --epochs 3 --out-dir "$out/moe-onegpu" > "$out/moe-onegpu.log" 2>&1
echo "moe one-GPU rc=$?"
OVL_KERNELS="$PWD/out-kern" timeout 300 python3 -m pytest -q -p no:cacheprovider packages/runtime-py/tests_gpu/test_moe_gpu.py \
  packages/runtime-py/tests_gpu/test_moe_rs_gpu.py packages/runtime-py/tests_gpu/test_torch_api_gpu.py > "$out/pytest.log" 2>&1
echo "tests_gpu rc=$?"
case "$name" in
  *H200*)
    timeout 330 python3 packages/bench/gpu/compute_bench.py out-compute-h200 --json "$out/bench-h200.json" --reps 10 --rounds 5 --budget-s 240 > "$out/bench-h200.log" 2>&1
    echo "compute_bench (h200) rc=$?" ;;
esac
