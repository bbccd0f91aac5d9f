"""The tensor-parallel MLP: AllGather + gate/up GEMM with the SiLU-mul epilogue (``ag-gemm-silu``), then
GEMM+ReduceScatter. ``silu_mul``: the SiLU-mul kernels; ``op``, ``autograd``, ``api``: the torch API; ``reference``
and ``torch_reference``: the first stage's references."""
