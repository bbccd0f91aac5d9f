#!/usr/bin/env bash
# One GPU call for the producers that notify a tile later (notifyAt "next-tile"): the one-GPU multi-rank check
# of every manifest under $CASES (default out-dnog: GEMM+RS and GEMM+AllReduce from `ovl emit`), the torch API's
# GPU tests of the tensor-parallel operators (kernels prebuilt into $KERN, default out-kern, by the test file's
# --prepare), then compute_bench.py over $BENCH (default out-dn2: emit-compute.ts bench --ops gemm-rs, TLX
# variants, deferred_notify_variants.py) $RUNS times in shuffled order. Everything goes to $OUT/results.tgz.
#   OVL_CLI="node $PWD/packages/cli/dist/bin.js" python packages/runtime-py/tests_gpu/test_torch_api_gpu.py --prepare out-kern
set -uo pipefail
res=$(mktemp -d)
trap 'tar czf "$OUT/results.tgz" -C "$res" .' EXIT
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps
{
  nvidia-smi --query-gpu=name,driver_version,clocks.current.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$res/device.txt"
cases=${CASES:-out-dnog}
timeout 200 python3 -m ovl_runtime run --ranks-on-one-gpu "$cases"/*/manifest.json --epochs 3 --out-dir "$res/onegpu" > "$res/onegpu.log" 2>&1
echo "one-GPU rc=$?"; grep -E "ok|FAILED" "$res/onegpu.log" | tail -12
OVL_KERNELS="$PWD/${KERN:-out-kern}" timeout 240 python3 -m pytest -q -p no:cacheprovider packages/runtime-py/tests_gpu/test_torch_api_gpu.py > "$res/pytest.log" 2>&1
echo "torch API tests rc=$?"; tail -2 "$res/pytest.log"
for i in $(seq 1 "${RUNS:-3}"); do
  timeout 200 python3 packages/bench/gpu/compute_bench.py "${BENCH:-out-dn2}" --json "$res/bench-$i.json" --reps 10 --rounds 5 --order shuffled > "$res/bench-$i.log" 2>&1
  echo "bench $i rc=$?"; tail -1 "$res/bench-$i.log"
done
nvidia-smi --query-gpu=clocks.current.sm,power.draw,temperature.gpu --format=csv >> "$res/device.txt"
