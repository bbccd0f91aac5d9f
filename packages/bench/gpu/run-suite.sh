#!/usr/bin/env bash
# Runs emitted suite manifests on the GPUs of this machine, one torchrun per world size
# running all the cases of that world, and merges the runner's reports into one file.
#   bash packages/bench/gpu/run-suite.sh <suite-dir> <out-dir> [case-glob]
# The world size of a case is read from its name (`..._w<N>_...`). Each world's torchrun
# gets 60 s plus 90 s per case; its output goes to <out-dir>/log.txt.
set -uo pipefail
suite=$1; out=$2; glob=${3:-*}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
src="$(cd "$(dirname "$0")/../../runtime-py/src" && pwd)"
export PYTHONPATH="$src${PYTHONPATH:+:$PYTHONPATH}"
reports=$(mktemp -d)
mkdir -p "$out"
declare -A by_world=()  # world -> the names of its cases, one per line
for dir in "$suite"/$glob/; do
  [ -d "$dir" ] || continue  # the glob matched nothing
  name=$(basename "$dir")
  world=$(echo "$name" | sed -n 's/.*_w\([0-9]*\)_.*/\1/p')
  [ -n "$world" ] || { echo "skip $name: no _w<N>_ in its name"; continue; }
  [ -f "$dir/manifest.json" ] || { echo "skip $name: no manifest.json"; continue; }
  by_world[$world]+="$name"$'\n'
done
[ ${#by_world[@]} -gt 0 ] || echo "no case in $suite matches $glob"
for world in $(printf '%s\n' "${!by_world[@]}" | sort -n); do
  mapfile -t names < <(printf '%s' "${by_world[$world]}")
  manifests=()
  for name in "${names[@]}"; do manifests+=("$suite/$name/manifest.json"); done
  limit=$((60 + 90 * ${#names[@]}))
  # OVL_SUITE_LIMIT_S caps it (a lease that ends sooner than the cases could).
  [ -n "${OVL_SUITE_LIMIT_S:-}" ] && [ "$OVL_SUITE_LIMIT_S" -lt "$limit" ] && limit=$OVL_SUITE_LIMIT_S
  echo "== world $world: ${names[*]}" >>"$out/log.txt"
  start=$(date +%s)
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((world - 1))) timeout --kill-after=30 "$limit" torchrun --nproc_per_node="$world" \
    -m ovl_runtime run "${manifests[@]}" --baselines --out-dir "$reports" >>"$out/log.txt" 2>&1
  rc=$?
  echo "world=$world cases=${#names[@]} rc=$rc $(( $(date +%s) - start ))s (limit ${limit}s)"
  python3 - "$reports" "$world" "${names[@]}" <<'PY'
import json, os, sys
src, world, names = sys.argv[1], sys.argv[2], sys.argv[3:]
for name in names:
    path = os.path.join(src, f"{name}.json")
    if not os.path.exists(path):
        print(f"  {name} world={world} no report")
        continue
    with open(path) as fh:
        r = json.load(fh)
    failures = r.get("failures") or []
    print(f"  {name} world={world} " + ("ok" if r.get("ok") else "failed: " + (failures[0].get("code", "?") if failures else "check")))
PY
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
