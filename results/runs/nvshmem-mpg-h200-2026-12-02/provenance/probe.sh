#!/usr/bin/env bash
# Two processes on GPU 0, NVSHMEM through nvshmem4py (carried as /out-vendor/nvshmem4py), each step bounded.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
export PYTHONPATH="$root/out-vendor/nvshmem4py:${PYTHONPATH:-}"
python3 -c "import cuda.pathfinder" 2>/dev/null || export PYTHONPATH="$PYTHONPATH:$root/out-vendor/extra"
export CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NVSHMEM_DEBUG=${NVSHMEM_DEBUG:-WARN}
work=$(mktemp -d)
out=${OUT:-$work}
pids=()
for r in 0 1; do
  (cd "$root" && timeout -k 5 150 python3 "$here/probe.py" "$r" 2 "$work" > "$out/probe-rank$r.log" 2>&1; echo "exit $?" >> "$out/probe-rank$r.log") &
  pids+=($!)
done
wait "${pids[@]}"
for r in 0 1; do echo "== rank $r"; grep -E "^\[rank|^exit|Error|error" "$out/probe-rank$r.log" | head -40; done
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv
