#!/usr/bin/env bash
# examples/tp_block.py --train on a 2-GPU host, in one call: every rank on GPU 0 at worlds 2 and 8, then under
# torchrun with one rank per GPU. Kernels prepared where Node is:
#   OVL_CLI="node packages/cli/dist/bin.js" python packages/runtime-py/examples/tp_block.py --prepare out-kern-block --world 2 8 --train
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps PYTHONUNBUFFERED=1 OVL_KERNELS=${OVL_KERNELS:-$PWD/out-kern-block}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
R=$OUT/tp-block-train; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
CUDA_VISIBLE_DEVICES=0 timeout 300 python3 packages/runtime-py/examples/tp_block.py --world 2 8 --train > $R/onegpu.log 2>&1
echo "one-GPU rc=$?"; grep "tp block" $R/onegpu.log || tail -20 $R/onegpu.log
timeout 200 torchrun --nproc_per_node=2 packages/runtime-py/examples/tp_block.py --torchrun --train > $R/torchrun.log 2>&1
echo "torchrun rc=$?"; grep "tp block" $R/torchrun.log || tail -20 $R/torchrun.log
tar czf $OUT/tp-block-train.tgz -C $OUT tp-block-train
