"""GEMM+AllReduce (``gemm-ar``): ``Σ_ranks x @ w`` on every rank, the partitioned AllReduce behind the GEMM. ``op``,
``autograd`` and ``api`` are the torch API; ``reference`` and ``torch_reference`` its references, ``emulate`` the
numpy engine's AllReduce kernels."""
