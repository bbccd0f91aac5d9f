#!/usr/bin/env bash
# One call on a 4-GPU host: matmul_all_reduce at world 4 from kernel libraries that differ only in
# ar_reduce_broadcast's launch (gemm_ar_broadcast_variants.py: BLOCK_N, programs per SM), then the torch API's
# all_to_all_matmul at worlds 4 and 2 beside NCCL all_to_all_single then cuBLAS. Prepared where Node is:
#   python -m ovl_runtime kernels gemm-ar ... --into out-kern-ar ; python -m ovl_runtime kernels a2a-gemm --world W
#     --m 8192 --n I/W --k H --target h100 --into out-kern-a2a      (MLP-1…6)
#   python3 packages/bench/gpu/diag/gemm_ar_broadcast_variants.py out-kern-ar out-kern-ar- n64:block_n=64 \
#     g2:per_sm=2 n64g2:block_n=64,per_sm=2 n256:block_n=256
set -u
WORLDS=4 TP_OP=gemm-ar RS_LIBS="default:out-kern-ar n64:out-kern-ar-n64 g2:out-kern-ar-g2 n64g2:out-kern-ar-n64g2 n256:out-kern-ar-n256" \
  bash packages/bench/gpu/torch-api-tp-run.sh
TP_OP=a2a-gemm RS_LIBS="ovl:out-kern-a2a" bash packages/bench/gpu/torch-api-tp-run.sh
