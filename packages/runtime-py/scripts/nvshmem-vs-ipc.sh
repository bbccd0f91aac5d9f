#!/usr/bin/env bash
# The nvshmem transfer backend against the CUDA-IPC paths, on one node of N GPUs (one process per GPU):
#   bash packages/runtime-py/scripts/nvshmem-vs-ipc.sh N OUT [SHAPE ...]      (default shapes: MLP-1 MLP-2)
# 1. emits, per shape, AG+GEMM and GEMM+RS with --backend nvshmem into OUT/nvshmem/, and the same operators over
#    the CUDA-IPC paths into OUT/ipc/ (AG+GEMM: copy-engine; GEMM+RS: copy-engine and sm); skipped with
#    OVL_SKIP_EMIT=1 (manifests emitted elsewhere: needs node and the built CLI, packages/cli/dist/bin.js);
# 2. runs each set under torchrun: one process group per symmetric-memory backend (PyTorch takes it from
#    TORCH_SYMMMEM when torch is imported, and under NVSHMEM it gives no peer views), so two torchruns: the IPC
#    manifests on the CUDA backend, the nvshmem ones on NVSHMEM (the runner selects it: nothing to set);
# 3. prints every operator's max-over-ranks median time per backend and the NVSHMEM/IPC ratio (the default stays
#    CUDA-IPC within a node until NVSHMEM is within 5% of it).
# Needs torch 2.11 (CUDA 13) with NVSHMEM (the nvidia-nvshmem-cu13 wheel it installs), triton 3.6, ovl-runtime.
set -uo pipefail
n=${1:?usage: nvshmem-vs-ipc.sh N OUT [SHAPE ...]}
out=${2:?usage: nvshmem-vs-ipc.sh N OUT [SHAPE ...]}
shift 2
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(MLP-1 MLP-2)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cli=(node "$here/../../cli/dist/bin.js")
# The runner sets these too; NVLink multicast can take a shared host's GPUs down.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset TORCH_SYMMMEM

if [ "${OVL_SKIP_EMIT:-0}" != 1 ]; then
  set -e
  for shape in "${shapes[@]}"; do
    for op in ag-gemm gemm-rs; do
      "${cli[@]}" emit "$op" --shape "$shape" --world "$n" --backend nvshmem --out "$out/nvshmem/${op}_${shape}" > /dev/null
      "${cli[@]}" emit "$op" --shape "$shape" --world "$n" --backend copy-engine --out "$out/ipc/${op}_${shape}_ce" > /dev/null
      if [ "$op" = gemm-rs ]; then
        "${cli[@]}" emit "$op" --shape "$shape" --world "$n" --backend sm --out "$out/ipc/${op}_${shape}_sm" > /dev/null
      fi
    done
  done
  set +e
fi

status=0
torchrun --nproc_per_node="$n" -m ovl_runtime run "$out"/ipc/*/manifest.json --out-dir "$out/reports/ipc" || status=$?
torchrun --nproc_per_node="$n" -m ovl_runtime run "$out"/nvshmem/*/manifest.json --out-dir "$out/reports/nvshmem" || status=$?

python3 - "$out/reports" <<'EOF'
import json, sys
from pathlib import Path

reports = Path(sys.argv[1])


def load(kind):
    out = {}
    for p in sorted((reports / kind).glob("*.json")):
        r = json.loads(p.read_text())
        ms = (r.get("times") or {}).get("maxMedian")
        out[p.stem] = (ms, r["backends"]["symmetricMemory"], r["ok"], [f.get("code") for f in r["failures"]])
    return out


ipc, nv = load("ipc"), load("nvshmem")
print(f"{'operator':24} {'nvshmem ms':>11} {'ipc':>4} {'ipc ms':>9} {'nvshmem/ipc':>12}")
for name, (ms, backend, ok, failures) in sorted(nv.items()):
    if not ok or ms is None:
        print(f"{name:24} FAILED ({backend}): {failures}")
        continue
    for tag in ("ce", "sm"):
        other = ipc.get(f"{name}_{tag}")
        if other is None:
            continue
        oms, obackend, ook, ofail = other
        if not ook or oms is None:
            print(f"{name:24} {ms:11.3f} {tag:>4} FAILED ({obackend}): {ofail}")
            continue
        ratio = ms / oms
        print(f"{name:24} {ms:11.3f} {tag:>4} {oms:9.3f} {ratio:12.3f}{'  within 5%' if ratio <= 1.05 else ''}")
EOF
exit $status
