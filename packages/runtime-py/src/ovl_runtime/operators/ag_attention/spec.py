"""Sequence-parallel attention (``ag-attention``): the reference's attention fields, their
cross-field checks, and the numpy reference.

Layout (row = sequence position, row-major): ``Q`` and the output ``O`` are ``[S, H·D]``
row-sharded (rank r holds positions ``r·S/W`` onward), ``KV`` is ``[S, 2·Hkv·D]`` row-sharded
and gathered: K of kv head g at columns ``g·D``, V of kv head g at ``(Hkv + g)·D``. Query
head h reads kv head ``h // (H / Hkv)``. Causal: the query at global position i attends keys
at positions ≤ i. The fields are read from the manifest's validated JSON
(``reference.attention``), beside the typed ``ReferenceSpec``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._manifest.types import Manifest
from ...errors import ManifestError


@dataclass(frozen=True)
class AttentionSpec:
    heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    scale: float


def attention_spec(m: Manifest) -> AttentionSpec:
    """The ``reference.attention`` fields of an ag-attention manifest."""
    raw = m.raw.get("reference") if isinstance(m.raw, dict) else None
    a = raw.get("attention") if isinstance(raw, dict) else None
    if not isinstance(a, dict):
        raise ManifestError("reference.attention", "ag-attention needs attention: { heads, kvHeads, headDim, causal, scale }")
    try:
        spec = AttentionSpec(int(a["heads"]), int(a["kvHeads"]), int(a["headDim"]), bool(a["causal"]), float(a["scale"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ManifestError("reference.attention", f"needs heads, kvHeads, headDim, causal and scale: {exc}") from exc
    return spec


def check_attention(m: Manifest) -> None:
    """An ag-attention reference: inputs Q and KV, M = S rows, N = H·D, K = 2·Hkv·D, H a
    multiple of Hkv, equal row shards, and Q / KV / O buffers that hold those shapes."""
    ref = m.reference
    for key in ("Q", "KV"):
        if key not in ref.inputs:
            raise ManifestError(f"reference.inputs.{key}", "ag-attention needs inputs Q and KV")
    a = attention_spec(m)
    if a.heads < 1 or a.kv_heads < 1 or a.head_dim < 1 or not a.scale > 0:
        raise ManifestError("reference.attention", "heads, kvHeads and headDim must be positive, scale a positive number")
    if a.heads % a.kv_heads:
        raise ManifestError("reference.attention", f"heads ({a.heads}) must be a multiple of kvHeads ({a.kv_heads})")
    if ref.N != a.heads * a.head_dim or ref.K != 2 * a.kv_heads * a.head_dim:
        raise ManifestError(
            "reference",
            f"N = {ref.N} and K = {ref.K} must be H·D = {a.heads * a.head_dim} and 2·Hkv·D = {2 * a.kv_heads * a.head_dim}",
        )
    if ref.rows_per_rank is None or ref.rows_per_rank * m.world != ref.M:
        raise ManifestError("reference.rowsPerRank", f"ag-attention shards the sequence evenly: rowsPerRank x world = S ({ref.M})")
    sizes = {"Q": ref.N, "KV": ref.K}
    for key, cols in sizes.items():
        n = m.buffer(ref.inputs[key]).numel
        if n not in (ref.M * cols, ref.rows_per_rank * cols):
            raise ManifestError(f"reference.inputs.{key}", f"buffer of {n} elements holds neither [S, {cols}] nor a rank's rows of it")


def attention(q: np.ndarray, kv: np.ndarray, a: AttentionSpec, q_start: int) -> np.ndarray:
    """``softmax(Q Kᵀ · scale) V`` per head, in float64: ``q`` ``[s, H·D]`` holds the queries of
    global positions ``q_start`` onward, ``kv`` ``[S, 2·Hkv·D]`` every position's K and V."""
    H, G, D = a.heads, a.kv_heads, a.head_dim
    s, S = q.shape[0], kv.shape[0]
    qh = q.astype(np.float64).reshape(s, H, D).transpose(1, 0, 2)
    kvh = kv.astype(np.float64).reshape(S, 2, G, D)
    k = np.repeat(kvh[:, 0].transpose(1, 0, 2), H // G, axis=0)
    v = np.repeat(kvh[:, 1].transpose(1, 0, 2), H // G, axis=0)
    scores = qh @ k.transpose(0, 2, 1) * a.scale
    if a.causal:
        visible = np.arange(S)[None, :] <= (q_start + np.arange(s))[:, None]
        scores = np.where(visible[None], scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(1, 0, 2).reshape(s, H * D)


#: The most bytes of attention scores ``torch_attention`` holds at once (it takes that many heads per step).
REFERENCE_SCORE_BYTES = 2 << 30


def torch_attention(q, kv, a: AttentionSpec, q_start: int):
    """``attention`` in torch (float32, on the tensors' device): for the GPU modes' references."""
    import torch

    H, G, D = a.heads, a.kv_heads, a.head_dim
    s, S = q.shape[0], kv.shape[0]
    qh = q.float().reshape(s, H, D).transpose(0, 1)
    kvh = kv.float().reshape(S, 2, G, D)
    visible = None
    if a.causal:
        visible = torch.arange(S, device=q.device)[None, :] <= (q_start + torch.arange(s, device=q.device))[:, None]
    out = torch.empty(H, s, D, device=q.device, dtype=torch.float32)
    # A few heads at a time: the scores of all heads at a long sequence would not fit (Attn-1 at 32k on
    # 4 ranks: 32 x 8192 x 32768 floats, 34 GB); each step's stay under REFERENCE_SCORE_BYTES.
    step = max(1, min(H, REFERENCE_SCORE_BYTES // max(1, s * S * 4)))
    for h0 in range(0, H, step):
        heads = range(h0, min(H, h0 + step))
        k = kvh[:, 0, [h // (H // G) for h in heads]].transpose(0, 1)
        v = kvh[:, 1, [h // (H // G) for h in heads]].transpose(0, 1)
        scores = qh[h0 : h0 + len(heads)] @ k.transpose(1, 2) * a.scale
        if visible is not None:
            scores = scores.masked_fill(~visible, float("-inf"))
        out[h0 : h0 + len(heads)] = torch.softmax(scores, dim=-1) @ v
    return out.transpose(0, 1).reshape(s, H * D)
