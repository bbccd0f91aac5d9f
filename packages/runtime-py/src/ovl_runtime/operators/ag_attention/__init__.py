"""Sequence-parallel attention (``ag-attention``): every rank's keys and values gathered behind the attention.
``spec`` reads the manifest's attention fields and holds the numpy and torch attention; ``op``, ``autograd`` and
``api`` are the torch API; ``reference`` and ``torch_reference`` the manifest references."""
