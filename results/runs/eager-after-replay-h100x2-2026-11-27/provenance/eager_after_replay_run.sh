#!/usr/bin/env bash
# One call on a 2-GPU host: eager_after_replay.py at world 2 (eager calls of a copy-engine operator after CUDA-graph
# replays, and under torch's profiler), then the torch API GPU tests that mix eager calls and replays with every
# rank on GPU 0. Prepared where Node is: out-kern-mlp (../../results/gpu/torch-api-mlp-h100x4-2026-11-27/) and
# out-kern-onegpu (python packages/runtime-py/tests_gpu/test_torch_api_gpu.py --prepare out-kern-onegpu).
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps OVL_TARGET=${OVL_TARGET:-h100} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
R=$OUT/eager-after-replay; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
OVL_KERNELS=$PWD/out-kern-mlp timeout 200 torchrun --nproc_per_node=2 packages/bench/gpu/diag/eager_after_replay.py > $R/w2.log 2>&1
echo "eager_after_replay rc=$?"; grep "^|\|world" $R/w2.log
OVL_KERNELS=$PWD/out-kern-onegpu CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m pytest -q -p no:cacheprovider \
  packages/runtime-py/tests_gpu/test_torch_api_gpu.py -k "replay or captures" --junitxml=$R/pytest.xml > $R/pytest.log 2>&1
echo "pytest rc=$?"; tail -3 $R/pytest.log; grep -o 'tests="[0-9]*" \|failures="[0-9]*"\|skipped="[0-9]*"' $R/pytest.xml | head -3
tar czf $OUT/eager-after-replay.tgz -C $OUT eager-after-replay
