#!/usr/bin/env bash
# One call on a 2-GPU host, world 2: the MLP layer benchmark (torch_api_tp_multigpu.py --op mlp) at MLP-5/6, then
# mlp_graph_replay.py without the profiler, with the runner's host ops (driver copies eager, torch copies captured)
# and with every host op through torch (OVL_HOST_COPIES=torch), then one profiled eager call of each at MLP-1.
# Prepared where Node is: the MLP kernels of ../../results/gpu/torch-api-mlp-h100x4-2026-11-27/ in out-kern-mlp.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps OVL_TARGET=${OVL_TARGET:-h100} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA OVL_KERNELS=$PWD/out-kern-mlp
R=$OUT/mlp-graph; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > $R/device.txt
timeout 150 torchrun --nproc_per_node=2 packages/bench/gpu/torch_api_tp_multigpu.py --op mlp --shapes MLP-5,MLP-6 --out $R/bench-w2.json > $R/bench-w2.log 2>&1
echo "bench rc=$?"; grep "^|" $R/bench-w2.log
for copies in driver torch; do
  OVL_HOST_COPIES=$copies timeout 120 torchrun --nproc_per_node=2 packages/bench/gpu/diag/mlp_graph_replay.py \
    --shapes MLP-1,MLP-5,MLP-6 --profile none --out $R/w2-$copies.json > $R/w2-$copies.log 2>&1
  echo "eager copies $copies rc=$?"; grep "^|" $R/w2-$copies.log
done
for copies in driver torch; do
  OVL_HOST_COPIES=$copies timeout 60 torchrun --nproc_per_node=2 packages/bench/gpu/diag/mlp_graph_replay.py \
    --shapes MLP-1 --profile eager --reps 5 > $R/w2-profile-$copies.log 2>&1
  echo "profiled, eager copies $copies rc=$?"; grep -A9 "^-- " $R/w2-profile-$copies.log | grep gemm_silu
done
tar czf $OUT/mlp-graph.tgz -C $OUT mlp-graph
