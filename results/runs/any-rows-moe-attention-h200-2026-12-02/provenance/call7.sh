# Device call 7 (one H200): the "compiles nothing for a new row count" GPU checks after they moved to
# support.counted_compiles(); kernels as call 5 (out-kern5).
tar -xJf out-pack/kern5.tar.xz && cd packages/runtime-py && export PYTHONPATH=$PWD/src:$PWD/../../out-nvd/deps OVL_KERNELS=$PWD/../../out-kern5
timeout 150 python3 -m pytest -q --timeout 100 -rf -k "compiles_nothing" tests_gpu/test_torch_api_gpu.py tests_gpu/test_moe_gpu.py > $OUT/compiles.log 2>&1; echo "exit $?"
echo "$(grep -o '^[.FEsx]*' $OUT/compiles.log | tr -d '\n' | wc -c) results"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/compiles.log | head
