#!/usr/bin/env bash
# One call on a 4-GPU host: how fast SM stores leave a GPU against the programs that issue them. diag_rs.py
# (each kernel alone, its waits met) on GEMM+RS over SM pushes with 4 … 64 push programs (rs_delivery_variants.py)
# at MLP-1, world 4 and MLP-2, world 2, and on GEMM+AllReduce over SM transfers at MLP-1, world 4 (its
# ar-reduce-broadcast alone: the reduction storing into every peer on every SM). Prepared where Node is:
#   ovl emit gemm-rs --shape MLP-1 --world 4 --target h100 --backend sm --comm-sms 16 --out out-push/rs_mlp1_w4_sm_
#   ovl emit gemm-rs --shape MLP-2 --world 2 --target h100 --backend sm --comm-sms 16 --out out-push/rs_mlp2_w2_sm_
#   ovl emit gemm-ar --shape MLP-1 --world 4 --target h100 --backend sm --out out-push/ar_mlp1_w4_sm_
#   python3 packages/bench/gpu/diag/rs_delivery_variants.py out-push rs_mlp1_w4_sm_ sm:8192x8x4,8192x8x8,8192x8x32,8192x8x64
#   python3 packages/bench/gpu/diag/rs_delivery_variants.py out-push rs_mlp2_w2_sm_ sm:8192x8x4,8192x8x8,8192x8x32
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA PYTHONUNBUFFERED=1
R=$OUT/push; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
timeout 280 torchrun --nproc_per_node=4 packages/bench/gpu/diag/diag_rs.py out-push/rs_mlp1_w4_sm_*/manifest.json \
  out-push/ar_mlp1_w4_sm_/manifest.json > $R/w4.log 2>&1
echo "w4 rc=$?"; grep "^gemm" $R/w4.log | sed 's/ | host[^|]*//g' | cut -c1-700
CUDA_VISIBLE_DEVICES=0,1 timeout 200 torchrun --nproc_per_node=2 packages/bench/gpu/diag/diag_rs.py out-push/rs_mlp2_w2_sm_*/manifest.json > $R/w2.log 2>&1
echo "w2 rc=$?"; grep "^gemm" $R/w2.log | sed 's/ | host[^|]*//g' | cut -c1-700
tar czf $OUT/push.tgz -C $OUT push
