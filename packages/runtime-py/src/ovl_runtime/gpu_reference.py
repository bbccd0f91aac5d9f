"""Torch references (through NCCL collectives) and the baselines timed beside an operator.

Same conventions as ``reference.py``: GEMM operators read inputs ``A`` and ``B``,
collectives their single input; row-sharded buffers hold the slab or the whole ``M`` rows,
the shards equal or uneven (``shards``: NCCL's gather and scatter need equal shards, so
uneven ones are gathered padded to the largest, and scattered by an all-reduce then a slice);
``ag-grouped-gemm`` reads B as [E, K, N] and the experts from ``reference.groupTable``.
Baselines: torch's compute alone (GEMM, GEMM + SiLU-mul, flash attention, the MoE expert GEMM
with its routing), the NCCL collective alone, both in sequence (not overlapped), and PyTorch's
async-TP fused ops where they exist.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import torch
import torch.distributed as dist

from .attention import attention_spec, torch_attention
from .errors import ManifestError
from .manifest import Manifest
from .outcome import Baseline
from .reference import expert_blocks, expert_runs
from .shards import rank_rows, row_counts


def _matrix(t: torch.Tensor, rows: tuple[int, ...], cols: int, where: str) -> torch.Tensor:
    for r in rows:
        if t.numel() == r * cols:
            return t.reshape(r, cols)
    raise ManifestError(where, f"buffer of {t.numel()} elements cannot be read as " + " or ".join(f"{r}x{cols}" for r in rows))


def _slab(t: torch.Tensor, first: int, rows: int) -> torch.Tensor:
    return t if t.shape[0] == rows else t[first : first + rows]


def _shard(m: Manifest, t: torch.Tensor, rank: int, cols: int, where: str) -> torch.Tensor:
    """``rank``'s shard of a row-sharded buffer (its rows, or all M rows), as a matrix."""
    first, rows = rank_rows(m, rank)
    return _slab(_matrix(t, (m.reference.M, rows), cols, where), first, rows)


def _gather_rows(m: Manifest, shard: torch.Tensor) -> torch.Tensor:
    """Every rank's shard (float32) in rank order, all M rows, through NCCL."""
    counts = row_counts(m)
    big = max(counts)
    if all(c == big for c in counts):
        full = torch.empty(sum(counts), shard.shape[1], device=shard.device, dtype=torch.float32)
        dist.all_gather_into_tensor(full, shard.float().contiguous())
        return full
    padded = torch.zeros(big, shard.shape[1], device=shard.device, dtype=torch.float32)
    padded[: shard.shape[0]] = shard.float()
    out = torch.empty(len(counts) * big, shard.shape[1], device=shard.device, dtype=torch.float32)
    dist.all_gather_into_tensor(out, padded)
    return torch.cat([out[r * big : r * big + c] for r, c in enumerate(counts)])


def _scatter_rows(m: Manifest, part: torch.Tensor, rank: int) -> torch.Tensor:
    """``rank``'s rows of the sum over ranks of ``part`` [M, cols] (float32), through NCCL."""
    counts = row_counts(m)
    if all(c == counts[0] for c in counts):
        out = torch.empty(counts[rank], part.shape[1], device=part.device, dtype=torch.float32)
        dist.reduce_scatter_tensor(out, part.float().contiguous())
        return out
    total = part.float().contiguous()
    dist.all_reduce(total)
    first, rows = rank_rows(m, rank)
    return total[first : first + rows]


def _grouped_matmul(m: Manifest, full: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``C[rows of m-block mb] = full[rows] @ B[expert(mb)]`` in float32, B read as [E, K, N]."""
    K, N = m.reference.K, m.reference.N
    if b.numel() % (K * N) != 0:
        raise ManifestError("reference.inputs.B", f"buffer of {b.numel()} elements cannot be read as [E, {K}, {N}]")
    b3 = b.reshape(-1, K, N).float()
    bm, experts = expert_blocks(m)
    c = torch.zeros(full.shape[0], N, device=full.device, dtype=torch.float32)
    for lo, hi, e in expert_runs(experts, bm):
        c[lo:hi] = full[lo:hi] @ b3[e]
    return c


def moe_matmul(full: torch.Tensor, w: torch.Tensor, topk: torch.Tensor, K: int, N: int) -> torch.Tensor:
    """ag-moe: ``C[t·k + j] = full[t] @ W[topk[t, j]]`` in float32 (W read as [E, K, N])."""
    ids = topk.reshape(full.shape[0], -1).long()
    k = ids.shape[1]
    w3 = w.reshape(-1, K, N).float()
    flat = ids.reshape(-1)
    c = torch.zeros(flat.numel(), N, device=full.device, dtype=torch.float32)
    for e in torch.unique(flat).tolist():
        slots = torch.nonzero(flat == e).squeeze(1)
        c[slots] = full[slots // k] @ w3[e]
    return c


def moe_rs_partial(h: torch.Tensor, w: torch.Tensor, topk: torch.Tensor, weights: torch.Tensor, M: int, K: int, N: int) -> torch.Tensor:
    """moe-rs, one rank's contribution ``[M, N]`` in float32: ``Σ_j weights[t, j] · (h[t·k + j] @ W[topk[t, j]])``."""
    ids = topk.reshape(M, -1).long()
    k = ids.shape[1]
    y = moe_matmul(h.reshape(M * k, K).float(), w, ids.reshape(-1, 1), K, N)  # one "token" per slot
    return (y * weights.reshape(-1, 1).float()).reshape(M, k, N).sum(1)


def _silu_mul(full: torch.Tensor, b: torch.Tensor, K: int, N: int) -> torch.Tensor:
    """ag-gemm-silu: ``silu(full @ W[:, :N]) * (full @ W[:, N:])`` with W = ``b`` as ``[K, 2N]``."""
    w = _matrix(b, (K,), 2 * N, "reference.inputs.B").float()
    return torch.nn.functional.silu(full @ w[:, :N]) * (full @ w[:, N:])


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    ref = m.reference
    M, N, K = ref.M, ref.N, ref.K
    if ref.operator == "ag-gemm":
        full = _gather_rows(m, _shard(m, inputs["A"], rank, K, "reference.inputs.A"))
        return full @ _matrix(inputs["B"], (K,), N, "reference.inputs.B").float()
    if ref.operator == "ag-gemm-silu":
        return _silu_mul(_gather_rows(m, _shard(m, inputs["A"], rank, K, "reference.inputs.A")), inputs["B"], K, N)
    if ref.operator == "a2a-gemm":
        recv = torch.empty(M, K, device=inputs["A"].device, dtype=torch.float32)
        dist.all_to_all_single(recv, _matrix(inputs["A"], (M,), K, "reference.inputs.A").float().contiguous())
        return recv @ _matrix(inputs["B"], (K,), N, "reference.inputs.B").float()
    if ref.operator == "ag-grouped-gemm":
        full = _gather_rows(m, _shard(m, inputs["A"], rank, K, "reference.inputs.A"))
        return _grouped_matmul(m, full, inputs["B"])
    if ref.operator == "ag-attention":
        kv = _gather_rows(m, _shard(m, inputs["KV"], rank, K, "reference.inputs.KV"))
        return torch_attention(_shard(m, inputs["Q"], rank, N, "reference.inputs.Q"), kv, attention_spec(m), rank_rows(m, rank)[0])
    if ref.operator == "ag-moe":
        full = _gather_rows(m, _shard(m, inputs["A"], rank, K, "reference.inputs.A"))
        return moe_matmul(full, inputs["B"], inputs["topk"], K, N)
    if ref.operator == "moe-rs":
        return _scatter_rows(m, moe_rs_partial(inputs["A"], inputs["B"], inputs["topk"], inputs["weights"], M, K, N), rank)
    if ref.operator in ("gemm-rs", "gemm-ar"):
        part = _matrix(inputs["A"], (M,), K, "reference.inputs.A").float() @ _matrix(inputs["B"], (K,), N, "reference.inputs.B").float()
        if ref.operator == "gemm-ar":
            dist.all_reduce(part)
            return part
        return _scatter_rows(m, part, rank)
    (key,) = ref.inputs
    x = inputs[key].float()
    where = f"reference.inputs.{key}"
    if ref.operator == "all-gather":
        return _gather_rows(m, _shard(m, x, rank, N, where))
    x = _matrix(x, (M,), N, where).contiguous()
    if ref.operator == "all-reduce":
        dist.all_reduce(x)
        return x
    return _scatter_rows(m, x, rank)


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's
    device (the one-GPU mode: no process group). Same conventions as ``torch_reference``."""
    ref = m.reference
    M, N, K = ref.M, ref.N, ref.K
    world = len(inputs)

    def total(f: Callable[[int], torch.Tensor]) -> torch.Tensor:
        acc = f(0)
        for q in range(1, world):
            acc = acc + f(q)
        return acc

    def slabs(key: str, cols: int) -> torch.Tensor:
        return torch.cat([_shard(m, x[key], r, cols, f"reference.inputs.{key}").float() for r, x in enumerate(inputs)])

    if ref.operator == "ag-gemm":
        full = slabs("A", K)
        return [full @ _matrix(x["B"], (K,), N, "reference.inputs.B").float() for x in inputs]
    if ref.operator == "ag-gemm-silu":
        full = slabs("A", K)
        return [_silu_mul(full, x["B"], K, N) for x in inputs]
    if ref.operator == "a2a-gemm":
        sends = [_matrix(x["A"], (M,), K, "reference.inputs.A").float() for x in inputs]
        rows = M // world
        return [
            torch.cat([s[r * rows : (r + 1) * rows] for s in sends]) @ _matrix(x["B"], (K,), N, "reference.inputs.B").float()
            for r, x in enumerate(inputs)
        ]
    if ref.operator == "ag-grouped-gemm":
        full = slabs("A", K)
        return [_grouped_matmul(m, full, x["B"]) for x in inputs]
    if ref.operator == "ag-attention":
        kv, a = slabs("KV", K), attention_spec(m)
        return [torch_attention(_shard(m, x["Q"], r, N, "reference.inputs.Q"), kv, a, rank_rows(m, r)[0]) for r, x in enumerate(inputs)]
    if ref.operator == "ag-moe":
        full = slabs("A", K)
        return [moe_matmul(full, x["B"], x["topk"], K, N) for x in inputs]
    if ref.operator == "moe-rs":
        summed = total(lambda q: moe_rs_partial(inputs[q]["A"], inputs[q]["B"], inputs[q]["topk"], inputs[q]["weights"], M, K, N))
        return [_slab(summed, *rank_rows(m, r)) for r in range(world)]
    if ref.operator in ("gemm-rs", "gemm-ar"):
        part = total(
            lambda q: (
                _matrix(inputs[q]["A"], (M,), K, "reference.inputs.A").float()
                @ _matrix(inputs[q]["B"], (K,), N, "reference.inputs.B").float()
            )
        )
        return [part if ref.operator == "gemm-ar" else _slab(part, *rank_rows(m, r)) for r in range(world)]
    (key,) = ref.inputs
    if ref.operator == "all-gather":
        full = slabs(key, N)
        return [full for _ in range(world)]
    summed = total(lambda q: _matrix(inputs[q][key], (M,), N, f"reference.inputs.{key}").float())
    return [summed if ref.operator == "all-reduce" else _slab(summed, *rank_rows(m, r)) for r in range(world)]


def output_view(m: Manifest, out: torch.Tensor, rank: int) -> torch.Tensor:
    """The part of a rank's output buffer the reference describes (``reference.output_view`` on tensors)."""
    ref = m.reference
    if ref.operator in ("gemm-rs", "reduce-scatter", "ag-attention", "moe-rs"):
        return _shard(m, out, rank, ref.N, "reference.output")
    if ref.operator == "ag-moe":  # one row per token slot t·k + j
        return _matrix(out, (out.numel() // ref.N,), ref.N, "reference.output")
    return _matrix(out, (ref.M,), ref.N, "reference.output")


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float32; NaN when the output holds NaN/inf."""
    o = out.float()
    if not bool(torch.isfinite(o).all()):
        return math.nan
    norm = float(ref.norm())
    diff = float((o - ref).norm())
    return diff / norm if norm > 0 else diff


def timed(fn: Callable[[], object], warmup: int, reps: int) -> list[float]:
    """Per-launch times in ms (CUDA events), each launch started together on every rank."""
    for _ in range(max(1, warmup)):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e))
    return out


def max_over_ranks(x: float) -> float:
    t = torch.tensor([x], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _attention_baselines(m: Manifest, dtype: torch.dtype, rows: int, padded: int) -> list[tuple[str, Callable[[], object]]]:
    """ag-attention not overlapped: NCCL's AllGather of K/V, then this rank's queries against every key
    its causal mask leaves visible (``scaled_dot_product_attention``, the flash backend where it takes
    the shapes; lower-right aligned: the rank's queries are the last rows of the visible keys)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    a = attention_spec(m)
    first = rank_rows(m, dist.get_rank())[0]
    kv_shard = torch.randn(rows, 2 * a.kv_heads * a.head_dim, device="cuda", dtype=dtype)
    gathered = torch.empty(padded, kv_shard.shape[1], device="cuda", dtype=dtype)
    q = torch.randn(1, a.heads, rows, a.head_dim, device="cuda", dtype=dtype)
    visible = first + rows if a.causal else m.reference.M
    kv = gathered[:visible].view(visible, 2, a.kv_heads, a.head_dim)
    k, v = kv[:, 0].permute(1, 0, 2).unsqueeze(0), kv[:, 1].permute(1, 0, 2).unsqueeze(0)
    mask = causal_lower_right(rows, visible) if a.causal else None

    def attend() -> torch.Tensor:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, scale=a.scale, enable_gqa=a.heads != a.kv_heads
            )

    return [
        ("torch-sdpa", attend),
        ("nccl-all-gather", lambda: dist.all_gather_into_tensor(gathered, kv_shard)),
        ("all-gather-then-sdpa", lambda: (dist.all_gather_into_tensor(gathered, kv_shard), attend())),
    ]


def _moe_baseline(m: Manifest, full: torch.Tensor, dtype: torch.dtype) -> tuple[str, Callable[[], object]]:
    """ag-moe's expert GEMM as a torch user runs it, on every token ``full`` and a routing drawn like the
    manifest's: the slots sorted by expert, the rows gathered, ``torch._grouped_mm`` (a cuBLAS GEMM per
    expert where it is missing), the rows scattered back to slot order — routing included, as the
    operator computes its tables on every launch."""
    import numpy as np

    from .moe import draw_routing

    ref = m.reference
    spec = m.buffer(ref.inputs["topk"])
    routing = spec.routing
    if routing is None:
        raise ManifestError("reference.inputs.topk", "ag-moe's topk buffer needs init routing")
    topk = spec.shape[1]
    ids = torch.from_numpy(draw_routing(np.random.default_rng(dist.get_rank()), ref.M, topk, routing.experts, routing.choices)).cuda()
    w = torch.randn(routing.experts, ref.K, ref.N, device="cuda", dtype=dtype)
    out = torch.empty(ref.M * topk, ref.N, device="cuda", dtype=dtype)
    gmm = getattr(torch, "_grouped_mm", None)

    def step() -> None:
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        rows = full[order // topk]
        if gmm is not None:
            offs = torch.cumsum(torch.bincount(flat, minlength=routing.experts), 0).to(torch.int32)
            out[order] = gmm(rows, w, offs=offs)
        else:
            res = torch.empty_like(rows)
            counts = torch.bincount(flat, minlength=routing.experts).tolist()
            lo = 0
            for e, n in enumerate(counts):
                torch.matmul(rows[lo : lo + n], w[e], out=res[lo : lo + n])
                lo += n
            out[order] = res

    return ("torch-moe-grouped-mm" if gmm is not None else "torch-moe-matmul-per-expert", step)


def baselines(m: Manifest, dtype: torch.dtype, warmup: int, reps: int) -> list[Baseline]:
    """Time the operator's non-overlapped parts and PyTorch async-TP (median, max over ranks)."""
    ref = m.reference
    M, N, K = ref.M, ref.N, ref.K
    counts = row_counts(m)
    # NCCL's gather and scatter move equal shards: uneven ones are timed at the largest
    # (M rounded up to a multiple of the world), and PyTorch's async-TP ops, which need equal
    # shards, are left out.
    rpr = max(counts)
    even = all(c == rpr for c in counts)
    gathers = ("ag-gemm", "ag-gemm-silu", "ag-grouped-gemm", "ag-moe", "ag-attention", "gemm-rs", "all-gather", "reduce-scatter")
    padded_m = rpr * m.world if ref.operator in gathers else M
    group_name = dist.group.WORLD.group_name
    cases: list[tuple[str, Callable[[], object]]] = []
    dev = "cuda"
    if ref.operator == "ag-gemm":
        shard = torch.randn(rpr, K, device=dev, dtype=dtype)
        gathered = torch.empty(padded_m, K, device=dev, dtype=dtype)
        full = gathered[:M]
        b = torch.randn(K, N, device=dev, dtype=dtype)
        c = torch.empty(M, N, device=dev, dtype=dtype)
        cases = [
            ("torch-gemm", lambda: torch.matmul(full, b, out=c)),
            ("nccl-all-gather", lambda: dist.all_gather_into_tensor(gathered, shard)),
            ("all-gather-then-gemm", lambda: (dist.all_gather_into_tensor(gathered, shard), torch.matmul(full, b, out=c))),
        ]
        if even:
            cases.append(("torch-async-tp", lambda: torch.ops.symm_mem.fused_all_gather_matmul(shard, [b], 0, group_name)))
    elif ref.operator == "a2a-gemm":
        send = torch.randn(M, K, device=dev, dtype=dtype)
        recv = torch.empty(M, K, device=dev, dtype=dtype)
        b = torch.randn(K, N, device=dev, dtype=dtype)
        c = torch.empty(M, N, device=dev, dtype=dtype)
        cases = [
            ("torch-gemm", lambda: torch.matmul(recv, b, out=c)),
            ("nccl-all-to-all", lambda: dist.all_to_all_single(recv, send)),
            ("all-to-all-then-gemm", lambda: (dist.all_to_all_single(recv, send), torch.matmul(recv, b, out=c))),
        ]
    elif ref.operator == "ag-grouped-gemm":
        shard = torch.randn(rpr, K, device=dev, dtype=dtype)
        gathered = torch.empty(padded_m, K, device=dev, dtype=dtype)
        full = gathered[:M]
        b3 = torch.randn(m.buffer(ref.inputs["B"]).numel // (K * N), K, N, device=dev, dtype=dtype)
        c = torch.empty(M, N, device=dev, dtype=dtype)
        bm, experts = expert_blocks(m)
        runs = expert_runs(experts, bm)

        def grouped() -> None:
            for lo, hi, e in runs:
                torch.matmul(full[lo:hi], b3[e], out=c[lo:hi])

        cases = [
            ("torch-grouped-gemm", grouped),
            ("nccl-all-gather", lambda: dist.all_gather_into_tensor(gathered, shard)),
            ("all-gather-then-grouped-gemm", lambda: (dist.all_gather_into_tensor(gathered, shard), grouped())),
        ]
    elif ref.operator in ("gemm-rs", "gemm-ar"):
        a = torch.randn(M, K, device=dev, dtype=dtype)
        b = torch.randn(K, N, device=dev, dtype=dtype)
        partial = torch.zeros(padded_m, N, device=dev, dtype=dtype)
        c = partial[:M]
        if ref.operator == "gemm-rs":
            out = torch.empty(rpr, N, device=dev, dtype=dtype)
            cases = [
                ("torch-gemm", lambda: torch.matmul(a, b, out=c)),
                ("nccl-reduce-scatter", lambda: dist.reduce_scatter_tensor(out, partial)),
                ("gemm-then-reduce-scatter", lambda: (torch.matmul(a, b, out=c), dist.reduce_scatter_tensor(out, partial))),
            ]
            if even:
                cases.append(("torch-async-tp", lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, group_name)))
        else:
            cases = [
                ("torch-gemm", lambda: torch.matmul(a, b, out=c)),
                ("nccl-all-reduce", lambda: dist.all_reduce(c)),
                ("gemm-then-all-reduce", lambda: (torch.matmul(a, b, out=c), dist.all_reduce(c))),
            ]
    elif ref.operator == "ag-gemm-silu":
        shard = torch.randn(rpr, K, device=dev, dtype=dtype)
        gathered = torch.empty(padded_m, K, device=dev, dtype=dtype)
        full = gathered[:M]
        w = torch.randn(K, 2 * N, device=dev, dtype=dtype)
        h = torch.empty(M, 2 * N, device=dev, dtype=dtype)

        def gemm_silu() -> torch.Tensor:
            torch.matmul(full, w, out=h)
            return torch.nn.functional.silu(h[:, :N]) * h[:, N:]

        cases = [
            ("torch-gemm-silu-mul", gemm_silu),
            ("nccl-all-gather", lambda: dist.all_gather_into_tensor(gathered, shard)),
            ("all-gather-then-gemm-silu-mul", lambda: (dist.all_gather_into_tensor(gathered, shard), gemm_silu())),
        ]
    elif ref.operator == "ag-attention":
        cases = _attention_baselines(m, dtype, rpr, padded_m)
    elif ref.operator == "ag-moe":
        tokens = torch.randn(rpr, K, device=dev, dtype=dtype)
        gathered = torch.empty(padded_m, K, device=dev, dtype=dtype)
        moe = _moe_baseline(m, gathered[:M], dtype)
        cases = [
            moe,
            ("nccl-all-gather", lambda: dist.all_gather_into_tensor(gathered, tokens)),
            (f"all-gather-then-{moe[0]}", lambda: (dist.all_gather_into_tensor(gathered, tokens), moe[1]())),
        ]
    elif ref.operator == "moe-rs":  # the ReduceScatter of the topk-reduced rows [T, H] that the reducer overlaps
        summed = torch.randn(M, N, device=dev, dtype=dtype)
        mine = torch.empty(rpr, N, device=dev, dtype=dtype)
        cases = [("nccl-reduce-scatter", lambda: dist.reduce_scatter_tensor(mine, summed))]
    else:
        x_full = torch.randn(padded_m, N, device=dev, dtype=dtype)
        x_slab = torch.randn(rpr, N, device=dev, dtype=dtype)
        if ref.operator == "all-gather":
            cases = [("nccl-all-gather", lambda: dist.all_gather_into_tensor(x_full, x_slab))]
        elif ref.operator == "reduce-scatter":
            cases = [("nccl-reduce-scatter", lambda: dist.reduce_scatter_tensor(x_slab, x_full))]
        else:
            cases = [("nccl-all-reduce", lambda: dist.all_reduce(x_full))]
    results = []
    for name, fn in cases:
        err: str | None = None
        try:
            med = statistics.median(timed(fn, warmup, reps))
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot run is reported, not fatal
            med, err = math.nan, f"{type(exc).__name__}: {str(exc)[:300]}"
        # Every rank takes part in the reduction, also when its own case failed.
        worst = max_over_ranks(med if err is None else math.inf)
        results.append(Baseline(name, None if err or math.isinf(worst) or math.isnan(worst) else worst, err))
    return results
