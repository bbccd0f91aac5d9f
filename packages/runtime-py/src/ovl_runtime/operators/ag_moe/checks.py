"""ag-moe's manifest checks: the reference's inputs and output, and the ``routing`` buffers it draws."""

from __future__ import annotations

from ..._manifest.types import BufferSpec, Manifest
from ...errors import ManifestError


def check_moe(m: Manifest) -> None:
    """An ag-moe reference: inputs A (the tokens [M, K]), B ([E, K, N]) and topk (a ``routing``
    buffer [M, k], k <= E, its experts those of B), output [M·k, N].

    @raises ManifestError at the field that is wrong.
    """
    ref = m.reference
    bufs = {b.name: b for b in m.buffers}
    for key in ("A", "B", "topk"):
        if key not in ref.inputs:
            raise ManifestError(f"reference.inputs.{key}", "ag-moe needs inputs A (tokens), B (experts' weights) and topk (the routing)")
    topk = bufs[ref.inputs["topk"]]
    if topk.dtype != "int32" or len(topk.shape) != 2 or topk.shape[0] != ref.M:
        raise ManifestError(
            "reference.inputs.topk", f"buffer {topk.name!r} must be int32 [M = {ref.M}, k], got {topk.dtype} {list(topk.shape)}"
        )
    k = topk.shape[1]
    experts, rest = divmod(bufs[ref.inputs["B"]].numel, ref.K * ref.N)
    if rest != 0 or experts < 1:
        raise ManifestError("reference.inputs.B", f"buffer {ref.inputs['B']!r} is not [E, K, N] with K x N = {ref.K * ref.N}")
    if topk.routing is not None and topk.routing.experts != experts:
        raise ManifestError(f"buffer {topk.name}.routing.experts", f"routes to {topk.routing.experts} experts, but B holds {experts}")
    if k > experts:
        raise ManifestError("reference.inputs.topk", f"top-k ({k}) exceeds the {experts} experts of B")
    out = bufs[ref.output]
    if out.numel != ref.M * k * ref.N:
        raise ManifestError("reference.output", f"buffer {out.name!r} must be [M·k, N] = [{ref.M * k}, {ref.N}], got {list(out.shape)}")


def check_routing_buffer(b: BufferSpec, path: str) -> None:
    """``init: "routing"`` comes with ``routing`` (and only then): an int32 [tokens, k] buffer,
    k distinct experts per token drawable from its choices."""
    if (b.init == "routing") != (b.routing is not None):
        raise ManifestError(path, 'a buffer has init "routing" exactly when it states routing: { experts, choices? }')
    if b.routing is None:
        return
    if b.dtype != "int32" or len(b.shape) != 2:
        raise ManifestError(path, f"a routing buffer is int32 [tokens, k], got {b.dtype} {list(b.shape)}")
    pool = b.routing.choices if b.routing.choices is not None else tuple(range(b.routing.experts))
    if any(not 0 <= e < b.routing.experts for e in pool) or len(set(pool)) != len(pool):
        raise ManifestError(f"{path}.routing.choices", f"choices must be distinct experts in [0, {b.routing.experts}), got {list(pool)}")
    if b.shape[1] > len(pool):
        raise ManifestError(f"{path}.routing", f"each token needs {b.shape[1]} distinct experts but only {len(pool)} can be drawn")
