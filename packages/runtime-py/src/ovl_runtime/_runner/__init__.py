"""Running manifests on GPUs: one rank's GPU state (buffers, tables, kernels, host ops, streams), the torchrun
mode (one process per GPU) and the one-GPU mode (every rank in one process), the bound operator the torch API
launches, precompiled (cubin) kernels in a session, the baselines timed beside an operator."""
