"""MoE part 1 (``ag-moe``): AllGather + Gather + GroupGEMM: routing on the device (``routing``, ``routing_kernels``), the
torch API (``op``, ``autograd``, ``api``), checks, references and numpy-engine kernels, and ``plain``: the gather then
the grouped GEMM without overlap (an operator serving any token count, below its crossover)."""
