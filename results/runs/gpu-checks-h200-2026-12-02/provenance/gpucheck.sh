tar -xJf out-pack/kern.tar.xz && cd packages/runtime-py && export PYTHONPATH=$PWD/src:$PWD/../../out-nvd/deps OVL_KERNELS=$PWD/../../out-kern
start=$(date +%s)
for t in test_torch_api_gpu test_models_gpu test_autograd_gpu test_mlp_gpu; do
  left=$(( 560 - ($(date +%s) - start) )); [ $left -gt 20 ] || { echo "$t: not run (time)"; continue; }
  timeout $left python3 -m pytest -q --timeout 150 -rf tests_gpu/$t.py > $OUT/$t.log 2>&1; echo "$t exit $? after $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
done
for t in test_torch_api_gpu test_models_gpu test_autograd_gpu test_mlp_gpu; do echo "== $t"; grep -E "passed|failed|^FAILED|^ERROR" $OUT/$t.log | tail -6; done
