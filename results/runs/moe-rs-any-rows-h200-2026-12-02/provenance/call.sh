# On the machine without a GPU, in packages/runtime-py (the CLI built): compile every key the checks need, both
# moe-rs operators (every token count, and each count) at the four shapes, bf16 and fp16.
python tests_gpu/test_moe_rs_gpu.py --prepare ../../out-moe-rs

# The device call (one H200), from the repository root, the kernels and the Python dependencies carried.
root=$PWD
export PYTHONPATH=$root/packages/runtime-py/src:$root/out-deps
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv; python3 -c "import torch,triton;print('torch',torch.__version__,'triton',triton.__version__,'cuda',torch.version.cuda)"; } > $OUT/device.txt 2>&1
cd packages/runtime-py && OVL_KERNELS=$root/out-moe-rs timeout 150 python3 -m pytest -q -p no:cacheprovider --timeout 120 tests_gpu/test_moe_rs_gpu.py
# Its output came back as moe-rs.log (kept here as moe-rs-gpu.log).
