#!/usr/bin/env bash
# One call on a 4-GPU host: comm_interference.py (a GEMM on GPU 0 beside copy-engine traffic, clocks and power),
# then ab_launch.py on GEMM+RS over SM pushes with and without cache hints in sm_push (rs_mlp1_w4_smhint_: the
# case's sm_push.py edited to evict_first loads and .cs stores) and over the copy engine. Lands in $OUT/interf.tgz.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA PYTHONUNBUFFERED=1
R=$OUT/interf; mkdir -p $R
timeout 120 python3 packages/bench/gpu/diag/comm_interference.py 3 > $R/interference.log 2>&1; echo "interference rc=$?"; cat $R/interference.log | tail -8
d=out-rsd
timeout 200 torchrun --nproc_per_node=4 packages/bench/gpu/diag/ab_launch.py $d/rs_mlp1_w4_sm_/manifest.json $d/rs_mlp1_w4_smhint_/manifest.json $d/rs_mlp1_w4_ce_/manifest.json --rounds 40 > $R/ab_hint.log 2>&1; echo "ab rc=$?"; grep "^|\|world" $R/ab_hint.log
tar czf $OUT/interf.tgz -C $OUT interf
