"""The baselines timed beside an operator under torchrun: torch's compute alone (GEMM, GEMM + SiLU-mul, flash
attention, the MoE expert GEMM with its routing), the NCCL collective alone, both in sequence (not overlapped), and
PyTorch's async-TP fused ops where they exist; per-launch times by CUDA events, the median's maximum over ranks."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import torch
import torch.distributed as dist

from .._manifest.shards import rank_rows, row_counts
from .._manifest.types import Manifest
from .._report.outcome import Baseline
from ..errors import ManifestError
from ..operators.ag_attention.spec import attention_spec
from ..operators.grouped_gemm.reference import expert_blocks, expert_runs


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

    from ..operators.ag_moe.routing import draw_routing

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


def _fp8_ag_gemm_cases(M: int, N: int, K: int, rpr: int, padded_m: int) -> list[tuple[str, Callable[[], object]]]:
    """fp8 AllGather+GEMM's plain parts: ``torch._scaled_mm`` (cuBLAS's fp8 GEMM, per-tensor scales, bf16 out) and
    NCCL's gather of the fp8 rows (as bytes: NCCL has no fp8 type). PyTorch's async-TP takes no scales: left out."""
    dev = "cuda"
    shard = torch.randn(rpr, K, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
    gathered = torch.empty(padded_m, K, device=dev, dtype=torch.float8_e4m3fn)
    full = gathered[:M]
    bt = torch.randn(N, K, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
    one = torch.ones((), device=dev, dtype=torch.float32)

    def gemm() -> object:
        return torch._scaled_mm(full, bt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    def gather() -> object:
        return dist.all_gather_into_tensor(gathered.view(torch.uint8), shard.view(torch.uint8))

    return [("torch-scaled-mm", gemm), ("nccl-all-gather", gather), ("all-gather-then-gemm", lambda: (gather(), gemm()))]


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
    world = dist.group.WORLD
    assert world is not None, "the baselines run in an initialised process group"
    group_name = world.group_name
    cases: list[tuple[str, Callable[[], object]]] = []
    dev = "cuda"
    if ref.operator == "ag-gemm" and dtype == torch.float8_e4m3fn:
        cases = _fp8_ag_gemm_cases(M, N, K, rpr, padded_m)
    elif ref.operator == "ag-gemm":
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

        def gather_then_grouped() -> None:
            dist.all_gather_into_tensor(gathered, shard)
            grouped()

        cases = [
            ("torch-grouped-gemm", grouped),
            ("nccl-all-gather", lambda: dist.all_gather_into_tensor(gathered, shard)),
            ("all-gather-then-grouped-gemm", gather_then_grouped),
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
