#!/usr/bin/env bash
# One call on a 4-GPU host: whether GEMM+ReduceScatter's copy-engine deliveries overlap its producer
# (ce_overlap.py), then the operator with each delivery variant under run-suite.sh (checked and timed beside
# cuBLAS, NCCL and async-TP). Prepared where Node is: `ovl emit gemm-rs --shape MLP-1|MLP-3 --world 4 --target h100
# [--backend sm] --out out-rsd/rs_mlp<s>_w4_<ce|sm>_`, then rs_delivery_variants.py on them.
set -u
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
dir=${RSD_DIR:-out-rsd}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/device.txt; nvidia-smi topo -m >> $OUT/device.txt 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" >> $OUT/device.txt
cat $OUT/device.txt | head -3
[ -n "${RSD_SKIP_OVERLAP:-}" ] || timeout 150 torchrun --nproc_per_node=4 packages/bench/gpu/diag/ce_overlap.py $dir/rs_mlp1_w4_ce_/manifest.json $OUT/ce_overlap.json > $OUT/ce_overlap.log 2>&1
echo "ce_overlap rc=$?"; grep "^|\|unavailable\|Error\|error" $OUT/ce_overlap.log | head -40
OVL_SUITE_LIMIT_S=${RSD_SUITE_LIMIT_S:-330} bash packages/bench/gpu/run-suite.sh $dir $OUT/suite '*_w4_*' | tail -14
python3 packages/bench/gpu/suite_report.py $OUT/suite/suite.json 2>/dev/null | tail -20
# Every rank on one GPU (a correctness mode), worlds 2 and 8: RSD_ONEGPU_DIR holds <op>_w<N>_<backend>_ cases.
if [ -n "${RSD_ONEGPU_DIR:-}" ]; then
  for w in 2 8; do
    CUDA_VISIBLE_DEVICES=0 timeout 240 python3 -m ovl_runtime run --ranks-on-one-gpu "$RSD_ONEGPU_DIR"/*_w${w}_*/manifest.json --epochs 3 \
      --out-dir $OUT/onegpu-w$w > $OUT/onegpu-w$w.log 2>&1
    echo "onegpu world $w rc=$?"
    python3 - $OUT/onegpu-w$w <<'PY'
import json, os, sys
for f in sorted(os.listdir(sys.argv[1])):
    r = json.load(open(os.path.join(sys.argv[1], f)))
    errs = [c.get("maxRelError") for c in r.get("checks", [])]
    print(f"  {f[:-5]}: {'ok' if r.get('ok') else 'FAILED'} checks {len(errs)} max rel. err {max(errs) if errs else None}")
PY
  done
fi
