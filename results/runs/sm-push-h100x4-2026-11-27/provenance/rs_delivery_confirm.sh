#!/usr/bin/env bash
# One call on a 4-GPU host: the GEMM+ReduceScatter delivery changes confirmed. ab_launch.py interleaves the
# operator before and after (the own partial copied or read in place; the old and new SM push defaults) launch by
# launch; then run-suite.sh over out-rsd's world-4 and world-2 cases. Everything lands in $OUT/res.tgz.
# Prepared as rs_delivery_run.sh says, plus the previous emitter's MLP-1 cases as rs_mlp1prev_w4_{ce,sm}_.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA PYTHONUNBUFFERED=1
R=$OUT/res; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; nvidia-smi topo -m >> $R/device.txt 2>&1
d=out-rsd
timeout 240 torchrun --nproc_per_node=4 packages/bench/gpu/diag/ab_launch.py $d/rs_mlp1prev_w4_ce_/manifest.json $d/rs_mlp1_w4_ce_/manifest.json $d/rs_mlp1prev_w4_sm_/manifest.json $d/rs_mlp1prev_w4_sm_b8192_nw8_s16_/manifest.json $d/rs_mlp1_w4_sm_/manifest.json --rounds 40 > $R/ab.log 2>&1; echo "ab rc=$?"; grep "^|\|world" $R/ab.log
OVL_SUITE_LIMIT_S=300 bash packages/bench/gpu/run-suite.sh $d $R/w4 '*_w4_*' | tail -3
python3 packages/bench/gpu/suite_report.py $R/w4/suite.json | tail -21
OVL_SUITE_LIMIT_S=150 bash packages/bench/gpu/run-suite.sh $d $R/w2 '*_w2_*' | tail -6
python3 packages/bench/gpu/suite_report.py $R/w2/suite.json | tail -6; tail -5 $R/w2/log.txt | cut -c1-600
tar czf $OUT/res.tgz -C $OUT res
