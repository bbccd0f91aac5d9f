"""GEMM+ReduceScatter (``gemm-rs``): this rank's rows of ``Σ_ranks x @ w``, the scatter hidden behind the GEMM.
``op`` registers the torch.library op, ``autograd`` its backward, ``api`` the Python functions; ``reference`` and
``torch_reference`` are its numpy and torch references."""
