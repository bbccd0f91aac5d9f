#!/usr/bin/env bash
# On a GPU machine (torch + triton, no Node), after attention-prepare.sh compiled <out>:
#  1. attention-compute.py: SDPA-flash vs the bare persistent body vs the emitted kernels
#     (waits satisfied) at the Attn-1 / Attn-2 per-rank shapes of world 8 -> $OUT/attention-compute.json;
#  2. the one-GPU multi-rank correctness run of every <out>/onegpu case (all ranks on this GPU,
#     the SM budget sizing the persistent grid) -> $OUT/onegpu/*.json, log in $OUT/onegpu.log.
#   OUT=/path bash packages/bench/gpu/attention-gpu.sh [out]     (default ./out-attn)
set -uo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
src="${1:-$repo/out-attn}"
res="${OUT:-$src/results}"
mkdir -p "$res/onegpu"
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo/packages/runtime-py/src:$repo/out-deps${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$res/device.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >>"$res/device.txt" 2>&1
status=0
timeout 1500 python3 "$repo/packages/bench/gpu/attention-compute.py" --out "$res/attention-compute.json" \
  --emitted "$src"/bench_s* 2>&1 | tee "$res/attention.log" || status=1
timeout 900 python3 -m ovl_runtime run --ranks-on-one-gpu "$src"/onegpu/*/manifest.json --epochs 3 \
  --out-dir "$res/onegpu" >"$res/onegpu.log" 2>&1 || status=1
tail -n 40 "$res/onegpu.log"
python3 - "$res/onegpu" <<'PY'
import json, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    r = json.loads(f.read_text())
    checks = r.get("checks", [])
    print(f"{f.stem:40s} ok={r.get('ok')} checks={sum(bool(c.get('ok')) for c in checks)}/{len(checks)} failures={len(r.get('failures', []))}")
PY
exit $status
