#!/usr/bin/env bash
# One call on a machine of several GPUs for moe-rs: on GPU 0 the one-GPU multi-rank run of small
# operators (both bodies), the torch API's MoE GPU tests and the compute benchmark; then under torchrun
# at worlds 2 and 4 the torch API's correctness script and moe-rs-multigpu.py (both bodies beside
# grouped_mm + scatter + top-k sum + NCCL ReduceScatter); logs under $OUT.
# Prepared where Node is (carry out-moe, out-kern, out-kern-dist, out-deps):
#   bash packages/bench/gpu/moe-rs-prepare.sh out-moe
#   OVL_CLI="node $PWD/packages/cli/dist/bin.js" python packages/runtime-py/tests_gpu/test_moe_rs_gpu.py --prepare out-kern
#   (and test_moe_gpu.py; moe_rs_torchrun.py's cases into out-kern-dist: python -m ovl_runtime kernels moe-rs ...)
#   bash packages/bench/gpu/vendor-deps.sh out-deps
set -u
out="${OUT:?set OUT}"
export PYTHONPATH="$PWD/packages/runtime-py/src:$PWD/out-deps"
gpus="$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nvidia-smi topo -m; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$out/device.txt" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 150 python3 -m ovl_runtime run --ranks-on-one-gpu out-moe/onegpu/*/manifest.json --epochs 3 --out-dir "$out/onegpu" > "$out/onegpu.log" 2>&1
echo "one-GPU rc=$?"
CUDA_VISIBLE_DEVICES=0 OVL_KERNELS="$PWD/out-kern" timeout 240 python3 -m pytest -q -p no:cacheprovider packages/runtime-py/tests_gpu/test_moe_rs_gpu.py \
  packages/runtime-py/tests_gpu/test_moe_gpu.py > "$out/pytest.log" 2>&1
echo "tests_gpu rc=$?"
CUDA_VISIBLE_DEVICES=0 timeout 150 python3 packages/bench/gpu/moe-rs-compute.py --emitted out-moe --out "$out/moe-rs-compute.json" --reps 10 --warmup 3 > "$out/moe-rs-compute.log" 2>&1
echo "moe-rs-compute rc=$?"
for w in 2 4; do
  [ "$w" -le "$gpus" ] || continue
  OVL_KERNELS="$PWD/out-kern-dist" timeout 180 torchrun --nproc_per_node="$w" packages/runtime-py/tests_gpu/moe_rs_torchrun.py > "$out/torchrun-w$w.log" 2>&1
  echo "moe_rs_torchrun w$w rc=$?"
  timeout 300 torchrun --nproc_per_node="$w" packages/bench/gpu/moe-rs-multigpu.py out-moe/multigpu --out "$out/moe-rs-multigpu-w$w.json" > "$out/moe-rs-multigpu-w$w.log" 2>&1
  echo "moe-rs-multigpu w$w rc=$?"
done
