# Sourced by the end-to-end run scripts (backends_e2e_run.sh, notify_e2e_run.sh): the environment of a run over
# several GPUs of one host (NVLink multicast off, the runner and its vendored dependencies on PYTHONPATH), and
#   torchrun_pass <label> <pass> <nproc> <timeout-s> <out-dir> [run args...] -- <manifest.json>...
# one `torchrun -m ovl_runtime run` over the manifests, in reverse order every second pass so that no case always
# runs first, its log in <out-dir>/log.txt, then a line: <label> rc, seconds, reports written.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps

torchrun_pass() {
  local label=$1 pass=$2 nproc=$3 limit=$4 dir=$5
  shift 5
  local args=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    args+=("$1")
    shift
  done
  shift
  local order=("$@")
  if [ $((pass % 2)) = 0 ]; then mapfile -t order < <(printf '%s\n' "$@" | tac); fi
  mkdir -p "$dir"
  local s
  s=$(date +%s)
  timeout "$limit" torchrun --nproc_per_node="$nproc" -m ovl_runtime run "${order[@]}" "${args[@]}" --out-dir "$dir" > "$dir/log.txt" 2>&1
  echo "$label rc=$? $(( $(date +%s) - s ))s $(ls "$dir"/*.json 2>/dev/null | wc -l) reports"
}
