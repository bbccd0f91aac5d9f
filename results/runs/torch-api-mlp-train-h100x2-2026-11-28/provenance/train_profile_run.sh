#!/usr/bin/env bash
# One call on a 2-GPU host: train_profile.py at world 2 (the MLP layer's training step, ovl's and torch's, each GPU
# activity per step), Chrome traces of rank 0 under $OUT/train-profile. Kernels: torch-api-tp-run.sh's mlp-train
# library (out-kern-mlptrain); shapes TRAIN_SHAPES (default MLP-1,MLP-5); TRAIN_ARGS=--graph: replays from CUDA graphs.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps PYTHONUNBUFFERED=1 OVL_TARGET=${OVL_TARGET:-h100}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
R=$OUT/train-profile; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
OVL_KERNELS=$PWD/out-kern-mlptrain timeout ${TRAIN_TIMEOUT:-240} torchrun --nproc_per_node=2 packages/bench/gpu/diag/train_profile.py \
  --shapes ${TRAIN_SHAPES:-MLP-1,MLP-5} --trace $R/traces ${TRAIN_ARGS:-} > $R/profile.log 2>&1
echo "train_profile rc=$?"; grep -v "^\[\|^W\|^I" $R/profile.log | grep "|\|span" | head -80
gzip -q $R/traces/*.json 2>/dev/null
tar czf $OUT/train-profile.tgz -C $OUT train-profile
