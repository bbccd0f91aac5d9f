#!/usr/bin/env bash
# One GPU call for the warp-specialised moe-rs body: the compute benchmark of the emitted producers at
# MoE-1…6 (moe-rs-compute.py: the default body and the per-tile-notify body beside torch._grouped_mm),
# the candidates of diag/moe_sorted.py, the one-GPU multi-rank run of small moe-rs operators (both
# bodies, worlds 2/4/8) and the torch API's MoE GPU tests (kernels prebuilt into out-kern); logs under $OUT.
# Prepared where Node is (carry out-moe, out-kern, out-deps):
#   bash packages/bench/gpu/moe-rs-prepare.sh out-moe
#   OVL_CLI="node $PWD/packages/cli/dist/bin.js" python packages/runtime-py/tests_gpu/test_moe_rs_gpu.py --prepare out-kern
#   (and test_moe_gpu.py --prepare out-kern); bash packages/bench/gpu/vendor-deps.sh out-deps
set -u
out="${OUT:?set OUT}"
export PYTHONPATH="$PWD/packages/runtime-py/src:$PWD/out-deps"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$out/device.txt"
timeout 200 python3 packages/bench/gpu/moe-rs-compute.py --emitted out-moe --out "$out/moe-rs-compute.json" --reps 10 --warmup 3 > "$out/moe-rs-compute.log" 2>&1
echo "moe-rs-compute rc=$?"
timeout 120 python3 packages/bench/gpu/diag/moe_sorted.py --out "$out/moe-sorted.json" > "$out/moe-sorted.log" 2>&1
echo "moe_sorted rc=$?"
timeout 150 python3 -m ovl_runtime run --ranks-on-one-gpu out-moe/onegpu/*/manifest.json --epochs 3 --out-dir "$out/onegpu" > "$out/onegpu.log" 2>&1
echo "moe-rs one-GPU rc=$?"
OVL_KERNELS="$PWD/out-kern" timeout 240 python3 -m pytest -q -p no:cacheprovider packages/runtime-py/tests_gpu/test_moe_rs_gpu.py \
  packages/runtime-py/tests_gpu/test_moe_gpu.py > "$out/pytest.log" 2>&1
echo "tests_gpu rc=$?"
