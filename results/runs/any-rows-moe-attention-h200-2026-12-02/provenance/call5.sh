# Device call 5 (one H200): the any-row-count ag-attention and ag-moe GPU checks, the models, the host cost of the
# operators as bound by default, the rest of the torch-API checks; kernels prepared here into out-kern5 and packed.
tar -xJf out-pack/kern5.tar.xz && cd packages/runtime-py && export PYTHONPATH=$PWD/src:$PWD/../../out-nvd/deps OVL_KERNELS=$PWD/../../out-kern5
start=$(date +%s)
step() {  # name, command...: run while time is left, record exit and seconds
  local name=$1; shift; local left=$(( 470 - ($(date +%s) - start) ))
  [ $left -gt 20 ] || { echo "$name: not run (time)" | tee -a $OUT/summary.txt; return; }
  timeout $left "$@" > $OUT/$name.log 2>&1; echo "$name exit $? after $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
}
step attention python3 -m pytest -q --timeout 150 -rf -k attention tests_gpu/test_torch_api_gpu.py
step moe python3 -m pytest -q --timeout 150 -rf tests_gpu/test_moe_gpu.py
step models python3 -m pytest -q --timeout 150 -rf tests_gpu/test_models_gpu.py
step host python3 ../bench/gpu/host_cost.py run --out $OUT/host.json
step torch_api_rest python3 -m pytest -q --timeout 150 -rf -k "not attention" tests_gpu/test_torch_api_gpu.py
for f in attention moe models torch_api_rest; do echo "$f: $(grep -o '^[.FEsx]*' $OUT/$f.log 2>/dev/null | tr -d '\n' | sed 's/\(.\)/\1\n/g' | sort | uniq -c | tr -s ' \n' ' ')"; grep -E "^(FAILED|ERROR)" $OUT/$f.log 2>/dev/null | head -5; done
tail -32 $OUT/host.log 2>/dev/null
