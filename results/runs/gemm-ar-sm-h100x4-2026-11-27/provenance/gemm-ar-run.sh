#!/usr/bin/env bash
# One call on a 4-GPU host for GEMM+AllReduce over SM transfers (ar-reduce-broadcast, the slot-wait kernel):
# the torch API's matmul_all_reduce at worlds 4 and 2, eager and from a CUDA graph, beside cuBLAS then NCCL
# AllReduce (torch-api-tp-run.sh, TP_OP=gemm-ar), then, with every rank on one GPU, the GPU tests of
# matmul_all_reduce (eager and captured) and emitted GEMM+AllReduce manifests under the runner. Prepared where
# Node is (carry out-deps, out-kern-ar, out-kern-onegpu, out-ar-emit):
#   python -m ovl_runtime kernels gemm-ar --world W --m 8192 --n H --k I/W --target h100 --into out-kern-ar   # MLP-1…6, W 4 and 2
#   python packages/runtime-py/tests_gpu/test_torch_api_gpu.py --prepare out-kern-onegpu
#   ovl emit gemm-ar --shape MLP-1 --world 8 --target h100 --backend sm --out out-ar-emit/ar_MLP-1_w8   # and the others
set -u
TP_OP=gemm-ar RS_LIBS=ovl:out-kern-ar bash packages/bench/gpu/torch-api-tp-run.sh
R=$OUT/onegpu; mkdir -p $R
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps CUDA_VISIBLE_DEVICES=0
for d in out-ar-emit/*/; do
  n=$(basename $d)
  timeout 100 python3 -m ovl_runtime run --ranks-on-one-gpu $d/manifest.json --out $R/$n.json > $R/$n.log 2>&1
  echo "$n rc=$?"; tail -2 $R/$n.log
done
(cd packages/runtime-py && OVL_KERNELS=$PWD/../../out-kern-onegpu PYTHONPATH=$PWD/src:$PWD/../../out-deps \
  timeout 150 python3 -m pytest tests_gpu/test_torch_api_gpu.py -q -rfEs -k "all_reduce or captured or first_call" > $R/tests_gpu.log 2>&1)
echo "tests_gpu rc=$?"; tail -3 $R/tests_gpu.log
tar czf $OUT/onegpu.tgz -C $OUT onegpu
