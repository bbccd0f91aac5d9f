#!/usr/bin/env bash
# Two (and four) processes on ONE GPU running ovl's nvshmem operators on NVSHMEM bootstrapped through nvshmem4py,
# checked against the runner's float32 reference, plus the fault case; a table last (nvshmem_mpg.py says what runs).
#   bash packages/runtime-py/tests_gpu/nvshmem_mpg.sh [MANIFESTS [OUT]] [-- driver options]
# MANIFESTS (default out-nvd): emitted here with packages/cli (see nvshmem_mpg.py), carried with out-vendor/
# (nvshmem4py, and cuda.pathfinder in out-vendor/extra) and out-nvd/deps (jsonschema, for a machine without it).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
manifests="${1:-$root/out-nvd}"
out="${2:-${OUT:-$root/out-nvd/run}}"
shift $(( $# >= 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
export PYTHONPATH="$root/packages/runtime-py/src:$root/out-vendor/nvshmem4py${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import cuda.pathfinder" 2>/dev/null || export PYTHONPATH="$PYTHONPATH:$root/out-vendor/extra"
python3 -c "import jsonschema" 2>/dev/null || export PYTHONPATH="$PYTHONPATH:$manifests/deps"
# The runner sets these too; NVLink multicast can take a shared host's GPUs down.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NVSHMEM_DEBUG="${NVSHMEM_DEBUG:-WARN}"
mkdir -p "$out"
python3 -c "import torch, triton, nvshmem.core; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv 2>/dev/null
python3 "$here/nvshmem_mpg.py" "$manifests" "$out" "$@"
