"""The plain collectives a manifest can claim (``all-gather``, ``reduce-scatter``, ``all-reduce``): the SM and
copy-engine communication kernels alone, without a GEMM. Manifest references only: ``reference`` (numpy) and
``torch_reference``."""
