#!/usr/bin/env bash
# One call on a 4-GPU host: torch_api_tp_multigpu.py at worlds 4 and 2 (the torch API's GEMM+ReduceScatter or
# AllGather+GEMM, eager and replayed from a CUDA graph, beside torch then NCCL), for the operator TP_OP (default
# gemm-rs; mlp-train: the MLP layer's training step) and once per kernel library of RS_LIBS ("label:dir ...",
# default "ovl:out-kern-rs"), at the worlds of WORLDS (default "4 2"), each world's run bounded by TP_TIMEOUT
# seconds (default 280). Prepared where Node is, for each MLP shape and world (S 8192, H hidden, I intermediate):
#   OVL_CLI="node $PWD/packages/cli/dist/bin.js" python -m ovl_runtime kernels gemm-rs --world W --m 8192 --n H --k I/W \
#     --target h100 --into out-kern-rs          (ag-gemm: --m 8192 --n I/W --k H)
# mlp-train needs ag-gemm-silu (--n I/W --k H) and gemm-rs (--n H --k I/W) for the forward, gemm-rs (--n H
# --k 2·I/W) and ag-gemm (--n I/W --k H) for the backward.
set -u
# The target's tuned kernels (the library holds h100 or h200 ones, or both): OVL_TARGET, else this machine's GPU.
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) default_target=h200 ;; *) default_target=h100 ;; esac
export PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps OVL_TARGET=${OVL_TARGET:-$default_target} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMMMEM=CUDA
op=${TP_OP:-gemm-rs}
R=$OUT/torch-api; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$R/device.txt"
for lib in ${RS_LIBS:-ovl:out-kern-rs}; do
  label=${lib%%:*}; dir=${lib#*:}
  for w in ${WORLDS:-4 2}; do
    run="$R/$op-$label-w$w"
    OVL_KERNELS=$PWD/$dir CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((w - 1))) timeout "${TP_TIMEOUT:-280}" torchrun --nproc_per_node="$w" \
      packages/bench/gpu/torch_api_tp_multigpu.py --op "$op" --out "$run.json" > "$run.log" 2>&1
    echo "$op $label world $w rc=$?"; grep "^|\|geometric\|world" "$run.log"
  done
done
tar czf "$OUT/torch-api.tgz" -C "$OUT" torch-api
