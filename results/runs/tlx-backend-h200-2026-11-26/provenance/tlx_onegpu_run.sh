#!/usr/bin/env bash
# On the GPU machine: the TLX backend's operators (emit-onegpu.ts --tlx, compiled with
# tlx-aot-compile.py, in out-tlx-onegpu) with every rank on this one GPU: correctness of the
# chunk waits, the deferred tile-done notifies and the deliveries, worlds 2/4/8 (ONEGPU_DIR: another
# directory of such manifests, e.g. a subset). The reports,
# the log and a summary travel back as $OUT/onegpu.tgz (few files: the transfer caps their count).
set -uo pipefail
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
d=/tmp/onegpu
rm -rf "$d" && mkdir -p "$d"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$d/device.txt"
timeout "${ONEGPU_S:-240}" python3 -m ovl_runtime run --ranks-on-one-gpu ${ONEGPU_DIR:-out-tlx-onegpu}/*/manifest.json --out-dir "$d" > "$d/run.log" 2>&1
echo "one-GPU run exit $?"
python3 - "$d" <<'PY' | tee "$d/summary.txt"
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    r = json.load(open(f))
    errs = [c.get("maxRelError") for c in r.get("checks", [])]
    print(f"{'ok  ' if r.get('ok') else 'FAIL'} {r.get('manifest')}: world {r.get('world')}, checks {len(errs)}, max rel err {max([e for e in errs if e is not None] or [float('nan')]):.2e}, failures {r.get('failures')[:1]}")
PY
tar czf "$OUT/onegpu.tgz" -C /tmp onegpu
