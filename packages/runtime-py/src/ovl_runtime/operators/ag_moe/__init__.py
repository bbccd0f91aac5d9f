"""MoE part 1 (``ag-moe``): AllGather + Gather + GroupGEMM, the routing tables built on the device (``routing``:
sizes and numpy reference; ``routing_kernels``: the Triton kernels). ``op``, ``autograd``, ``api``: the torch API;
``checks``, ``reference``, ``torch_reference``, ``emulate``: manifest checks, references, numpy-engine kernels;
``plain``: the gather then the grouped GEMM without overlap (an operator serving any token count, below its crossover)."""
