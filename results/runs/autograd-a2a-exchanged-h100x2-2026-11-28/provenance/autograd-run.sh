#!/usr/bin/env bash
# The torch API's backward passes on a 2-GPU host, in one call: tests_gpu/test_autograd_gpu.py with every rank on
# GPU 0 (the one-GPU mode), then tests_gpu/autograd_torchrun.py with one rank per GPU. Kernels prepared where Node
# is: python packages/runtime-py/tests_gpu/test_autograd_gpu.py --prepare out-kern-autograd2 (carry it, and
# out-deps from vendor-deps.sh). Logs under $OUT/autograd.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps PYTHONUNBUFFERED=1 OVL_KERNELS=${OVL_KERNELS:-$PWD/out-kern-autograd2}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
R=$OUT/autograd; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
CUDA_VISIBLE_DEVICES=0 timeout 300 python3 -m pytest -q -p no:cacheprovider packages/runtime-py/tests_gpu/test_autograd_gpu.py \
  --junitxml=$R/onegpu.xml > $R/onegpu.log 2>&1
echo "one-GPU rc=$?"; tail -3 $R/onegpu.log
timeout 200 torchrun --nproc_per_node=2 packages/runtime-py/tests_gpu/autograd_torchrun.py > $R/torchrun.log 2>&1
echo "torchrun rc=$?"; grep "^ok\|^FAIL" $R/torchrun.log
tar czf $OUT/autograd.tgz -C $OUT autograd
