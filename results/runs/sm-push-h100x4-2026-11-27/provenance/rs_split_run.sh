#!/usr/bin/env bash
# One call on a 4-GPU host: where a GEMM+ReduceScatter launch spends its time. ce_overlap.py (the copies and the
# producer started together: when each ended) and diag_rs.py (each kernel alone, the copies alone, the launch
# without its reduce, one launch's timeline) on the copy-engine and SM-push cases of out-rsd (rs_delivery_run.sh
# says how they are emitted). Everything lands in $OUT/split.tgz.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA PYTHONUNBUFFERED=1
d=${RSD_DIR:-out-rsd}
R=$OUT/split; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
timeout 200 torchrun --nproc_per_node=4 packages/bench/gpu/diag/ce_overlap.py $d/rs_mlp1_w4_ce_/manifest.json $R/ce_overlap.json > $R/ce_overlap.log 2>&1
echo "ce_overlap rc=$?"; grep "^|" $R/ce_overlap.log
timeout 240 torchrun --nproc_per_node=4 packages/bench/gpu/diag/diag_rs.py $d/rs_mlp1_w4_ce_/manifest.json $d/rs_mlp1_w4_sm_/manifest.json \
  $d/rs_mlp3_w4_ce_/manifest.json $d/rs_mlp3_w4_sm_/manifest.json > $R/diag_rs.log 2>&1
echo "diag_rs rc=$?"; grep "^gemm\|timeline" $R/diag_rs.log | cut -c1-900
tar czf $OUT/split.tgz -C $OUT split
