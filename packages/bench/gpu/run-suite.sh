#!/usr/bin/env bash
# Runs emitted suite manifests on the GPUs of this machine, one torchrun per case, and
# merges the runner's reports into one file.
#   bash packages/bench/gpu/run-suite.sh <suite-dir> <out-dir> [case-glob]
# The world size of a case is read from its name (`..._w<N>_...`).
set -uo pipefail
suite=$1; out=$2; glob=${3:-*}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
export PYTHONPATH="$(cd "$(dirname "$0")/../../runtime-py/src" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
reports=$(mktemp -d)
mkdir -p "$out"
for dir in "$suite"/$glob/; do
  name=$(basename "$dir")
  world=$(echo "$name" | sed -n 's/.*_w\([0-9]*\)_.*/\1/p')
  [ -n "$world" ] || { echo "skip $name: no _w<N>_ in its name"; continue; }
  start=$(date +%s)
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((world - 1))) timeout 150 torchrun --nproc_per_node="$world" \
    -m ovl_runtime run "$dir/manifest.json" --baselines --out "$reports/$name.json" >>"$out/log.txt" 2>&1
  echo "$name world=$world rc=$? $(( $(date +%s) - start ))s"
done
python3 - "$reports" "$out/suite.json" <<'PY'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
merged = {}
for f in sorted(os.listdir(src)):
    with open(os.path.join(src, f)) as fh:
        merged[f[:-5]] = json.load(fh)
with open(dst, "w") as fh:
    json.dump(merged, fh, indent=1)
print(f"{len(merged)} reports merged into {dst}")
PY
