#!/usr/bin/env bash
# One call on a 4-GPU host: the torch API's matmul_all_reduce (GEMM+AllReduce over SM transfers) from kernel
# libraries that differ only in ar_reduce_broadcast, at worlds 4 and 2 beside cuBLAS then NCCL AllReduce, then
# matmul_reduce_scatter from the same shapes' GEMM+RS library (the AllReduce's ReduceScatter half alone):
#   per-tile       each program release-adds 1 to every peer's slot after every tile (copied in from the
#                  kernel as first emitted)
#   per-program    each program counts its tiles and release-adds the count once, after its last (the default)
#   per-program-8w the same with 8 warps (manifest edited)
# Prepared where Node is: python -m ovl_runtime kernels gemm-ar|gemm-rs ... --target h100 --into out-kern-ar|out-kern-rs
# (MLP-1…6, worlds 4 and 2), the two copies edited as above (out-kern-ar-tile, out-kern-ar-w8).
set -u
TP_OP=gemm-ar RS_LIBS="per-tile:out-kern-ar-tile per-program:out-kern-ar per-program-8w:out-kern-ar-w8" \
  bash packages/bench/gpu/torch-api-tp-run.sh
TP_OP=gemm-rs RS_LIBS="rs:out-kern-rs" bash packages/bench/gpu/torch-api-tp-run.sh
