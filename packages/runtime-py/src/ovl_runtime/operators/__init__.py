"""One place per operator: each folder holds that operator's torch.library op with its fake and backward, its Python
function, its manifest checks, its numpy and torch references and its numpy-engine kernels where they are its own.
The public faces (:mod:`ovl_runtime.ops`, :mod:`ovl_runtime.nn`) re-export from here; import those instead."""
