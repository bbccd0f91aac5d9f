"""The kernel library: where the torch API finds a compiled operator (the search path, the cache), and compiling
one on demand through ovl's compiler."""
