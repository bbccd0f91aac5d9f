"""CPU emulation of a manifest, ranks as threads: the numpy engine (the kernel templates re-implemented) and the
interpreter engine (the emitted Triton source under Triton's interpreter, patched to be safe), deadlock detection,
and chains of operators run back to back."""
