# The command of each device call (one NVIDIA H200), at commit 25b590f's working tree with out-tune-bench, out-tune-kern
# and out-deps carried (prepared here by `bash packages/bench/gpu/tune-prepare.sh`). Call 1's tune_runtime.py step
# failed (its keys still named the per-row-count GEMM+RS operator; the torch API binds the one for every row count):
# fixed in tune_runtime.key_of, kernels prepared again, call 2. Call 2 also times cuBLASLt beside the producers' grid
# (the carveout of torch's default cuBLAS path measured 1.001 of its whole-GPU time in call 1: it did not apply).
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps:$PWD/packages/bench/gpu
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit,driver_version --format=csv > $OUT/gpu-before.csv
timeout 300 python3 packages/bench/gpu/compute_bench.py out-tune-bench --json $OUT/tune-bench.json --budget-s 240 > $OUT/tune-bench.log 2>&1; echo "bench exit $?"
OVL_KERNELS=$PWD/out-tune-kern timeout 240 python3 packages/bench/gpu/tune_runtime.py run --out $OUT/tune-runtime.json > $OUT/tune-runtime.log 2>&1; echo "runtime exit $?"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu-after.csv
