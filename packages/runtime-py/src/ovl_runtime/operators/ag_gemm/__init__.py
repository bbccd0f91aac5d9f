"""AllGather+GEMM (``ag-gemm``): ``cat(x over ranks) @ w``, the gather hidden behind the GEMM. ``op`` registers
the torch.library ops, ``autograd`` their backward, ``api`` the Python functions; ``reference`` and
``torch_reference`` are its numpy and torch references."""
