"""Ahead-of-time compiled (cubin) kernels: their metadata and launch plan (pure), argument packing and the CUDA
driver calls that load and launch them."""
