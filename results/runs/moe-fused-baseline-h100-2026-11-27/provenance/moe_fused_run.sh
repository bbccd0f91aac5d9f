#!/usr/bin/env bash
# One GPU call: both MoE halves beside the vLLM-style fused-MoE baseline (../fused_moe.py) at MoE-1…6
# (world 8 per-rank shapes), RUNS times — moe_bodies.py (the emitted ag-moe consumer at two tiles, and
# any earlier emission put beside it under p1/<name>, the plain bodies, fused_moe at each configuration,
# torch._grouped_mm; PARTS=12 adds part 2) and moe-rs-compute.py (the moe-rs producer and its
# compute-stream chain beside fused_moe, fused_moe + topk-sum and _grouped_mm + scatter + topk-reduce);
# then the one-GPU multi-rank run of small ag-moe operators and the torch API's MoE GPU tests. JSON
# under $OUT, logs in $OUT/logs.tgz. RS=0 leaves moe-rs-compute.py out.
# Prepared where Node is (carry out-moe-diag, out-moe, out-kern, out-deps):
#   bash packages/bench/gpu/diag/moe_bodies_prepare.sh out-moe-diag
#   bash packages/bench/gpu/moe-rs-prepare.sh out-moe; bash packages/bench/gpu/vendor-deps.sh out-deps
#   OVL_CLI="node $PWD/packages/cli/dist/bin.js" python packages/runtime-py/tests_gpu/test_moe_gpu.py --prepare out-kern
set -u
out="${OUT:?set OUT}"
logs="$out/logs"
mkdir -p "$logs"
export PYTHONPATH="$PWD/packages/runtime-py/src:$PWD/out-deps"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.draw --format=csv; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$out/device.txt"
for run in $(seq 1 "${RUNS:-1}"); do
  timeout 200 python3 packages/bench/gpu/diag/moe_bodies.py --emitted out-moe-diag --parts "${PARTS:-1}" --out "$out/moe-bodies-run$run.json" --reps "${REPS:-30}" --warmup 5 > "$logs/moe-bodies-run$run.log" 2>&1
  echo "moe_bodies run $run rc=$?"
  if [ "${RS:-1}" = 1 ]; then
    timeout 100 python3 packages/bench/gpu/moe-rs-compute.py --emitted out-moe --out "$out/moe-rs-compute-run$run.json" --reps "${REPS:-30}" --warmup 5 > "$logs/moe-rs-compute-run$run.log" 2>&1
    echo "moe-rs-compute run $run rc=$?"
  fi
done
timeout 120 python3 -m ovl_runtime run --ranks-on-one-gpu out-moe-diag/onegpu/agmoe_*/manifest.json --epochs 3 --out-dir "$logs/onegpu" > "$logs/onegpu.log" 2>&1
echo "ag-moe one-GPU rc=$?"
OVL_KERNELS="$PWD/out-kern" timeout 120 python3 -m pytest -q -p no:cacheprovider packages/runtime-py/tests_gpu/test_moe_gpu.py > "$logs/pytest.log" 2>&1
echo "tests_gpu rc=$?"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> "$out/device.txt"
tail -n 4 "$logs/onegpu.log"; tail -n 2 "$logs/pytest.log"
# One archive of the logs (the machine returns few files).
tar czf "$out/logs.tgz" -C "$out" logs && rm -r "$logs"
