#!/usr/bin/env bash
# One call on a 4-GPU host: GEMM+ReduceScatter over SM pushes with 4, 8 and 16 push programs (the producer leaving
# them free), launched in turn by ab_launch.py, per shape and world. Prepared where Node is:
#   ovl emit gemm-rs --shape MLP-<s> --world <W> --target h100 --backend sm --out out-rsd2/rs_mlp<s>_w<W>_sm_
#   python3 packages/bench/gpu/diag/rs_delivery_variants.py out-rsd2 rs_mlp<s>_w<W>_sm_ sm:8192x8x4,8192x8x8
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA PYTHONUNBUFFERED=1
d=${RSD_DIR:-out-rsd2}
R=$OUT/comm-sms; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
for c in $(ls $d | grep '_sm_$'); do
  w=$(echo $c | sed -n 's/.*_w\([0-9]*\)_.*/\1/p'); stem=${c%_sm_}
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((w - 1))) timeout 150 torchrun --nproc_per_node=$w packages/bench/gpu/diag/ab_launch.py \
    $d/$c/manifest.json $d/${stem}_sm_b8192_nw8_s8_/manifest.json $d/${stem}_sm_b8192_nw8_s4_/manifest.json --rounds 30 > $R/$stem.log 2>&1
  echo "$stem rc=$?"; grep "^| [gr]" $R/$stem.log
done
tar czf $OUT/comm-sms.tgz -C $OUT comm-sms
