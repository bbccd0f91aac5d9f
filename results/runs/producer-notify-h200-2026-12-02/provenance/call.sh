# The device calls (one NVIDIA H200 each), over the working tree with out-* folders carried; prepared here (no GPU):
#   emit-compute.ts tune out-tune-bench --target h200     (packages/sim; the compiler of each commit)
#   python3 notify_variants.py prepare out-tune-bench out-notify   (calls 1-3; VARIANTS was ("tile-sys", "tile-gpu",
#     "plain", "k2", "k4", "k8") in call 1, ("tile-gpu", "plain", "plain-asm", "k1", "k4", "k4-relaxed", "k4-nobar",
#     "k4-tma") in call 2, as in the script in call 3)
#   python3 notify_variants.py ab out-tune-old out-tune-bench out-notify   (call 4: before = commit 247ac3b's compiler,
#     after = commit 90dc13b's)
#   python3 tests_gpu/test_torch_api_gpu.py --prepare out-kern-rs gemm-rs (then gemm-ar)   (call 5, packages/runtime-py)
root=$PWD; export PYTHONPATH=$root/packages/runtime-py/src:$root/out-deps
cp out-call/notify_variants.py packages/bench/gpu/ && cd packages/bench/gpu
# Calls 1-3: the variants, timed within sweeps beside cuBLAS, then every variant's signals and output checked equal.
timeout 300 python3 compute_bench.py $root/out-notify --json $OUT/notify-bench.json --budget-s 200 > $OUT/notify-bench.log 2>&1
timeout 120 python3 notify_variants.py check $root/out-notify > $OUT/notify-check.log 2>&1
python3 notify_variants.py report $OUT/notify-bench.json > $OUT/notify-report.txt 2>&1
# Call 4: before/after in the same sweeps (ab-*), then the on-device tuning bench over the new compiler's output.
timeout 200 python3 compute_bench.py $root/out-notify --json $OUT/ab-bench.json --budget-s 150 > $OUT/ab-bench.log 2>&1
timeout 90 python3 notify_variants.py check $root/out-notify > $OUT/ab-check.log 2>&1
python3 notify_variants.py report $OUT/ab-bench.json > $OUT/ab-report.txt 2>&1
timeout 300 python3 compute_bench.py $root/out-tune-bench --json $OUT/tune-bench.json --budget-s 240 > $OUT/tune-bench.log 2>&1
# Call 5: the torch API's GEMM+RS and GEMM+AR checks on the GPU.
cd $root/packages/runtime-py
OVL_KERNELS=$root/out-kern-rs timeout 400 python3 -m pytest -q -p no:cacheprovider --timeout 150 -rfs \
  -k "reduce_scatter or all_reduce or (compiles_nothing_for_a_new_row_count and not a2a)" tests_gpu/test_torch_api_gpu.py > $OUT/torch-api-rs-ar.log 2>&1
# Call 6: `notify_variants.py ab out-tune-old out-tune-mid out-notify` (coal-*: call 4's next kernels, runs as one add)
timeout 200 python3 compute_bench.py $root/out-notify --json $OUT/coal-bench.json --budget-s 150 > $OUT/coal-bench.log 2>&1
timeout 90 python3 notify_variants.py check $root/out-notify > $OUT/coal-check.log 2>&1
# Call 7: `notify_variants.py ab out-tune-old out-tune-mid out-notify out-tune-bench` (emit-*: commit 4b58134's output;
# out-tune-mid: commit 90dc13b's), then calls 4's tune bench and call 5's torch-API checks over commit 4b58134's kernels.
# Call 8: call 7's check, out-notify/compute.json without its next-* cases.
# Call 9: language.py's predicated notify with its scope joined into one asm text (commit after 0934fe9): call 8's
# check (emit-sys: system scope, emit-gpu: gpu scope) and call 5's torch-API checks, the same kernels.
