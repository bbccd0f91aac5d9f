# Device call 3 (one H200), run from the repository root of main at f789114 + the a2a-gemm merge, carrying out-pack
# (kern.tar.xz: the kernels `python tests_gpu/test_torch_api_gpu.py --prepare out-kern` compiled here), out-tlx (the
# TLX kernels `python tests_gpu/test_tlx_torch_gpu.py --prepare out-tlx` compiled and AOT-compiled here with
# fbtriton 3.7.4) and out-nvd/deps (jsonschema for a machine without a package index).
tar -xJf out-pack/kern.tar.xz && cd packages/runtime-py && export PYTHONPATH=$PWD/src:$PWD/../../out-nvd/deps
OVL_KERNELS=$PWD/../../out-tlx timeout 200 python3 -m pytest tests_gpu/test_tlx_torch_gpu.py -s -v -rf > $OUT/tlx.log 2>&1; echo "tlx exit $?"
OVL_KERNELS=$PWD/../../out-kern timeout 330 python3 -m pytest -q --timeout 150 -rf tests_gpu/test_torch_api_gpu.py > $OUT/torch_api.log 2>&1; echo "api exit $?"
