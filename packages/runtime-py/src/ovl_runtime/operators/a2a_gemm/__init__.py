"""AllToAll+GEMM (``a2a-gemm``): ``AllToAll(x) @ w``, the slab exchange hidden behind the GEMM. ``op`` registers
the torch.library ops, ``autograd`` their backward, ``api`` the Python function; ``reference`` and
``torch_reference`` are its numpy and torch references."""
