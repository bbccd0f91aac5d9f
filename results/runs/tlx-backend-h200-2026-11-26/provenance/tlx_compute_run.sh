#!/usr/bin/env bash
# On the GPU machine: the compute benchmark with the TLX variants (emit-compute.ts bench, then
# emit-tlx-compute.ts and tlx-aot-compile.py, here, for out-compute-h100 and out-compute-h200),
# the directory of the GPU that came. First one shape alone under a short bound (a TLX kernel
# that deadlocks costs two minutes, not ten), then all 36 shapes. Logs and JSON under $OUT.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in *H200*) t=h200 ;; *) t=h100 ;; esac
dir=out-compute-$t
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/device.txt"
first=$(python3 -c "import json; print(json.load(open('$dir/compute.json'))['shapes'][${QUICK_SHAPE:-0}]['name'])")
python3 - "$dir" "$first" <<'PY'
import json, sys
d, first = sys.argv[1], sys.argv[2]
b = json.load(open(f"{d}/compute.json"))
b["shapes"] = [s for s in b["shapes"] if s["name"] == first]
json.dump(b, open(f"{d}/quick.json", "w"))
PY
mkdir -p /tmp/quick && cp -r "$dir"/. /tmp/quick/ && mv /tmp/quick/quick.json /tmp/quick/compute.json
timeout 150 python3 packages/bench/gpu/compute_bench.py /tmp/quick --json /tmp/quick-$t.json --reps 5 --rounds 1 2>&1 | tee "$OUT/quick-$t.log" | tail -12
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then echo "quick run failed ($rc)"; exit "$rc"; fi
timeout "${FULL_S:-400}" python3 packages/bench/gpu/compute_bench.py "$dir" --json "$OUT/bench-$t.json" --reps 10 --rounds 5 2>&1 | tee "$OUT/bench-$t.log" | tail -45
