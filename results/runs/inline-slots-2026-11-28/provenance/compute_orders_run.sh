#!/usr/bin/env bash
# On the GPU machine: compute_bench.py over each bench directory of $DIRS (default out-aginl), once per
# order of $ORDERS (default "shuffled shuffled"; "fixed": cuBLAS first, then the cases in the file's
# order, every round), after one shape of the first directory alone under a short bound (a kernel
# that hangs costs two minutes, not ten). Logs and JSON go to $OUT/results.tgz (<dir>-<i>-<order>.{log,json}:
# one file comes back however many runs there are), the device state to $OUT/device.txt.
set -uo pipefail
dirs=${DIRS:-out-aginl}
res=$(mktemp -d)
trap 'tar czf "$OUT/results.tgz" -C "$res" .' EXIT
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps
nvidia-smi --query-gpu=name,driver_version,clocks.current.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > "$OUT/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/device.txt"
first=${dirs%% *}
python3 - "$first" <<'PY'
import json, sys
d = sys.argv[1]
b = json.load(open(f"{d}/compute.json"))
b["shapes"] = b["shapes"][:1]
json.dump(b, open(f"{d}/quick.json", "w"))
PY
mkdir -p /tmp/quick && cp -r "$first"/. /tmp/quick/ && mv /tmp/quick/quick.json /tmp/quick/compute.json
timeout 150 python3 packages/bench/gpu/compute_bench.py /tmp/quick --json /tmp/quick.json --reps 3 --rounds 1 > "$res/quick.log" 2>&1
rc=$?
tail -3 "$res/quick.log"
if [ "$rc" != 0 ]; then echo "quick run failed ($rc)"; exit "$rc"; fi
for d in $dirs; do
  i=0
  for order in ${ORDERS:-shuffled shuffled}; do
    i=$((i + 1))
    name=$(basename "$d")-$i-$order
    timeout "${FULL_S:-250}" python3 packages/bench/gpu/compute_bench.py "$d" --json "$res/$name.json" --reps 10 --rounds 5 --order "$order" > "$res/$name.log" 2>&1
    echo "$name rc=$?"; tail -3 "$res/$name.log"
  done
done
nvidia-smi --query-gpu=clocks.current.sm,power.draw,temperature.gpu --format=csv >> "$OUT/device.txt"
