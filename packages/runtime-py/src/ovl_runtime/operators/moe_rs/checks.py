"""moe-rs's manifest checks: the reference's inputs (``h``, the experts, the routing and its weights) and output."""

from __future__ import annotations

from ..._manifest.types import Manifest
from ...errors import ManifestError


def check_moe_rs_reference(m: Manifest) -> None:
    """A moe-rs reference: inputs A (``h`` [M·k, K]), B ([E, K, N]), topk (a ``routing`` buffer [M, k],
    k <= E, its experts those of B) and weights ([M, k], the same on every rank: ``replicated``), output
    each rank's rows [M/W, N].

    @raises ManifestError at the field that is wrong.
    """
    ref = m.reference
    bufs = {b.name: b for b in m.buffers}
    for key in ("A", "B", "topk", "weights"):
        if key not in ref.inputs:
            raise ManifestError(
                f"reference.inputs.{key}", "moe-rs needs inputs A (h), B (experts' weights), topk (the routing) and weights (topk weights)"
            )
    topk = bufs[ref.inputs["topk"]]
    if topk.dtype != "int32" or len(topk.shape) != 2 or topk.shape[0] != ref.M or topk.init != "routing":
        raise ManifestError(
            "reference.inputs.topk",
            f"buffer {topk.name!r} must be an int32 routing buffer [M = {ref.M}, k], got {topk.dtype} {list(topk.shape)} init {topk.init}",
        )
    k = topk.shape[1]
    wts = bufs[ref.inputs["weights"]]
    if list(wts.shape) != [ref.M, k] or wts.init not in ("replicated", "keep"):
        raise ManifestError(
            "reference.inputs.weights",
            f"buffer {wts.name!r} must be [M, k] = [{ref.M}, {k}], init replicated, got {list(wts.shape)} {wts.init}",
        )
    experts, rest = divmod(bufs[ref.inputs["B"]].numel, ref.K * ref.N)
    if rest != 0 or experts < 1:
        raise ManifestError("reference.inputs.B", f"buffer {ref.inputs['B']!r} is not [E, K, N] with K x N = {ref.K * ref.N}")
    if topk.routing is not None and topk.routing.experts != experts:
        raise ManifestError(f"buffer {topk.name}.routing.experts", f"routes to {topk.routing.experts} experts, but B holds {experts}")
    if bufs[ref.inputs["A"]].numel != ref.M * k * ref.K:
        raise ManifestError("reference.inputs.A", f"buffer {ref.inputs['A']!r} must be [M·k, K] = [{ref.M * k}, {ref.K}]")
