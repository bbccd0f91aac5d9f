# Device call 6 (one H200): the 15 torch-API checks call 5 had no time left for (the tests after the 53rd of
# `-k "not attention"`, listed in rest.txt), same kernels.
tar -xJf out-pack/kern5.tar.xz && cd packages/runtime-py && export PYTHONPATH=$PWD/src:$PWD/../../out-nvd/deps OVL_KERNELS=$PWD/../../out-kern5
timeout 200 python3 -m pytest -q --timeout 120 -rf $(sed 's|^tests_gpu|tests_gpu|' ../../out-pack/rest.txt) > $OUT/torch_api_rest2.log 2>&1; echo "rest exit $?"
echo "$(grep -o '^[.FEsx]*' $OUT/torch_api_rest2.log | tr -d '\n' | wc -c) results"; grep -E "^(FAILED|ERROR)" $OUT/torch_api_rest2.log | head
