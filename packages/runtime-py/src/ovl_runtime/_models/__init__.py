"""The internals of :mod:`ovl_runtime.models`: what a decoder is made of (``plan``), how its weights are cut
(``shard``), the parallel layers (``layers``, ``step``), the model (``model``) and the plain collectives beside
ovl's operators (``comm``)."""
