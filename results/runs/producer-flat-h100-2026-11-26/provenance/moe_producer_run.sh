#!/usr/bin/env bash
# One GPU call: the MoE bodies (moe_bodies.py), the one-GPU multi-rank check of small ag-moe / moe-rs
# operators and of GEMM+RS with the flattened producer, and the compute benchmark of every MLP
# per-rank GEMM (compute_bench.py) for this GPU's target, each bounded in time; logs under $OUT.
# Prepared where Node is (carry the folders):
#   bash packages/bench/gpu/diag/moe_bodies_prepare.sh out-moe-diag
#   (cd packages/bench && npx tsx src/gpu/emit-compute.ts bench ../../out-compute-<target> --model-k 4 --model-roles producer --target <target>)
#   bash packages/bench/gpu/vendor-deps.sh out-deps
#   out-rs-onegpu/<case>: ovl emit gemm-rs --kernel packages/tlx-emitter/kernels/gemm_producer_tma_flat.py ...
set -u
out="${OUT:?set OUT}"
export PYTHONPATH="$PWD/packages/runtime-py/src:$PWD/out-deps"
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in *H200*) target=h200 ;; *) target=h100 ;; esac
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$out/device.txt"
timeout 240 python3 packages/bench/gpu/diag/moe_bodies.py --emitted out-moe-diag --out "$out/moe-bodies.json" > "$out/moe-bodies.log" 2>&1
echo "moe_bodies rc=$?"
timeout 120 python3 -m ovl_runtime run --ranks-on-one-gpu out-moe-diag/onegpu/*/manifest.json --epochs 3 --out-dir "$out/moe-onegpu" > "$out/moe-onegpu.log" 2>&1
echo "moe one-GPU rc=$?"
timeout 90 python3 -m ovl_runtime run --ranks-on-one-gpu out-rs-onegpu/*/manifest.json --epochs 3 --out-dir "$out/rs-onegpu" > "$out/rs-onegpu.log" 2>&1
echo "gemm-rs one-GPU rc=$?"
timeout 330 python3 packages/bench/gpu/compute_bench.py "out-compute-$target" --json "$out/bench-$target.json" --reps 10 --rounds 5 --budget-s 240 > "$out/bench-$target.log" 2>&1
echo "compute_bench ($target) rc=$?"
