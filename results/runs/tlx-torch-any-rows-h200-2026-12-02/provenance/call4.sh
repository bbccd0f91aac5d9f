# Device call 4 (one H200), main at 4f451b1 + merges, carrying out-pack (kern.tar.xz: the GPU tests' kernels prepared
# with each tests_gpu file's --prepare, and the four any-row-count operators of `rows_sweep.py prepare`) and out-nvd/deps.
tar -xJf out-pack/kern.tar.xz && cd packages/runtime-py && export PYTHONPATH=$PWD/src:$PWD/../../out-nvd/deps OVL_KERNELS=$PWD/../../out-kern
start=$(date +%s)
timeout 200 python3 ../bench/gpu/rows_sweep.py run --out $OUT/rows.json > $OUT/rows.log 2>&1; echo "rows_sweep exit $? after $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
for t in test_models_gpu test_autograd_gpu test_mlp_gpu; do
  left=$(( 520 - ($(date +%s) - start) )); [ $left -gt 20 ] || { echo "$t: not run (time)"; continue; }
  timeout $left python3 -m pytest -q --timeout 150 -rf tests_gpu/$t.py > $OUT/$t.log 2>&1; echo "$t exit $? after $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
done
tail -50 $OUT/rows.log | grep -v "^{"
