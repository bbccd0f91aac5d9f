#!/usr/bin/env bash
# One call on a 4-GPU host: the copy-engine operators launched with their host ops through torch and through the
# driver (OVL_HOST_COPIES=torch|driver): diag_rs.py (host enqueue time, launch, parts) and run-suite.sh on
# operators-multigpu-prepare.sh's world-4 cases; then the one-GPU ag-moe / moe-rs cases and the torch API's MoE GPU
# tests with the driver path. Prepared: operators-multigpu-prepare.sh out-ops-mg (plus gemm-rs MLP-1 w4 in
# out-ops-mg/rs_mlp1_w4_), diag/moe_bodies_prepare.sh out-moe-diag, test_moe_gpu.py --prepare out-kern.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 TORCH_SYMMMEM=CUDA
for mode in torch driver; do
  OVL_HOST_COPIES=$mode timeout 100 torchrun --nproc_per_node=4 packages/bench/gpu/diag/diag_rs.py out-ops-mg/rs_mlp1_w4_/manifest.json out-ops-mg/ar_mlp1_w4_/manifest.json out-ops-mg/a2a_mlp1_w4_/manifest.json 2>&1 | grep -v "^W1127\|OMP_NUM\|^\*\*\*\*" | grep -v timeline > $OUT/diag-$mode.log
  echo "diag $mode rc=$?"; cat $OUT/diag-$mode.log | cut -c1-400
done
for mode in torch driver; do
  OVL_HOST_COPIES=$mode OVL_SUITE_LIMIT_S=150 bash packages/bench/gpu/run-suite.sh out-ops-mg $OUT/suite-$mode '*_w4_*' | tail -12
done
OVL_HOST_COPIES=driver timeout 100 python3 -m ovl_runtime run --ranks-on-one-gpu out-moe-diag/onegpu/*/manifest.json --epochs 3 --out-dir $OUT/onegpu > $OUT/onegpu.log 2>&1; echo "onegpu rc=$?"; grep '"summary"' $OUT/onegpu.log
OVL_HOST_COPIES=driver OVL_KERNELS=$PWD/out-kern timeout 100 python3 -m pytest -q -p no:cacheprovider packages/runtime-py/tests_gpu/test_moe_gpu.py > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -2 $OUT/pytest.log
