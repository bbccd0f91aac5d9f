#!/usr/bin/env bash
# One call on a 4-GPU host: capture_backward.py, one process per case and capture mode (a failed capture can leave
# a process unusable). Kernels: out-kern-mlptrain (../torch-api-tp-run.sh's mlp-train keys, world 4, h100).
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps OVL_TARGET=h100 PYTHONUNBUFFERED=1 OVL_KERNELS=$PWD/out-kern-mlptrain
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
R=$OUT/capture-backward; mkdir -p $R
for mode in ${MODES:-global thread_local}; do
  for case in "tp_mlp forward only" "torch autograd + NCCL" "matmul_reduce_scatter" "all_gather_matmul" "all_gather_matmul_silu_mul" "tp_mlp"; do
    log="$R/${mode}-${case// /_}.log"
    timeout 150 torchrun --nproc_per_node=4 packages/bench/gpu/diag/capture_backward.py --mode $mode --case "$case" > "$log" 2>&1
    grep "^|" "$log" || echo "| $case | $mode | rc=$? (no report) |"
  done
done
tar czf $OUT/capture-backward.tgz -C $OUT capture-backward
