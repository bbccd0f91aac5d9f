#!/usr/bin/env bash
# One call on a 4-GPU host: the torch API's four tensor-parallel GEMM operators (matmul_reduce_scatter,
# matmul_all_reduce, all_gather_matmul, all_to_all_matmul) at worlds 4 and 2, eager and from CUDA graphs, beside
# what torch then NCCL does (torch_api_tp_multigpu.py via torch-api-tp-run.sh), with the kernels tuned for this
# machine's GPU (h100 or h200). Prepared where Node is, for t in h100 h200, MLP-1…6 (H hidden, I intermediate), W 4, 2:
#   python -m ovl_runtime kernels gemm-rs|gemm-ar --world W --m 8192 --n H --k I/W --target t --into out-kern-tp/rs|ar
#   python -m ovl_runtime kernels ag-gemm|a2a-gemm --world W --m 8192 --n I/W --k H --target t --into out-kern-tp/ag|a2a
set -u
for op in gemm-rs:rs gemm-ar:ar ag-gemm:ag a2a-gemm:a2a; do
  TP_OP=${op%%:*} RS_LIBS="ovl:out-kern-tp/${op#*:}" bash packages/bench/gpu/torch-api-tp-run.sh
done
