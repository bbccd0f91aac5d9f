"""MoE part 2 (``moe-rs``): GroupGEMM + Scatter + TopK-reduce + ReduceScatter, the routing on the device. ``kernels``:
the runner's Triton kernels, sizes check, references; ``op``, ``autograd``, ``api``: the torch API; ``checks``,
``reference``, ``torch_reference``, ``emulate``: manifest checks, references, numpy-engine kernels."""
