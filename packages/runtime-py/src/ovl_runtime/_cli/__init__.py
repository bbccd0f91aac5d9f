"""``python -m ovl_runtime``: the command line (``run``, ``kernels``, ...) the TypeScript driver and the ``ovl`` CLI
spawn."""
