#!/usr/bin/env bash
# One call on a 4-GPU host: matmul_all_reduce from two kernel libraries that differ only in ar_reduce_broadcast's
# tile width (128 and 64 columns; gemm_ar_broadcast_variants.py n64:block_n=64), launched in turn twice (A, B, A, B)
# at worlds 4 and 2 through torch-api-tp-run.sh, each beside cuBLAS then NCCL AllReduce.
set -u
WORLDS="4 2" TP_OP=gemm-ar RS_LIBS="n128-a:out-kern-ar n64-a:out-kern-ar-n64 n128-b:out-kern-ar n64-b:out-kern-ar-n64" \
  bash packages/bench/gpu/torch-api-tp-run.sh
