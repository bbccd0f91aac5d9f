#!/usr/bin/env bash
# One call on a 2-GPU host: tp_mlp_small.py (the tensor-parallel MLP's launches alone at 128 rows per rank), then
# the torchrun autograd check. Kernels: python packages/runtime-py/tests_gpu/test_autograd_gpu.py --prepare out-kern-autograd.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
R=$OUT/tp-mlp-small; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
OVL_KERNELS=$PWD/out-kern-autograd timeout 240 torchrun --nproc_per_node=2 packages/bench/gpu/diag/tp_mlp_small.py > $R/diag.log 2>&1
echo "tp_mlp_small rc=$?"; grep "^rank" $R/diag.log; grep -i "error\|Traceback" $R/diag.log | head -5
OVL_KERNELS=$PWD/out-kern-autograd timeout 120 torchrun --nproc_per_node=2 packages/runtime-py/tests_gpu/autograd_torchrun.py > $R/autograd.log 2>&1
echo "autograd rc=$?"; grep "rank" $R/autograd.log | head -12
tar czf $OUT/tp-mlp-small.tgz -C $OUT tp-mlp-small
