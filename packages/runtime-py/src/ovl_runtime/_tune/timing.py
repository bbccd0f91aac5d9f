"""A candidate's GEMM kernel alone on this GPU, and cuBLAS at the same GEMM, timed as the compute bench times them
(``packages/bench/gpu/compute_bench.py`` with ``timer.py``): CUDA events around each launch, the L2 flushed before
each (256 MiB written), every candidate and cuBLAS launched once per sweep and compared within it.

The kernel is the compiled operator's own compute kernel (its waits and notifies in place), loaded as the runner
loads it (:class:`~ovl_runtime._runner.rank.RankState`, one rank on the whole device: a GEMM+ReduceScatter producer
gets the grid it runs on beside its push kernel) and launched *warm*: every wait target is 0, so every wait is met at
once — exactly "its waits satisfied", the GEMM's own time. Before it is timed it computes random operands once and
must match an fp32 reference (a configuration that computes a wrong result is never kept). Imports torch: GPU only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .._manifest.types import BufferSpec, Manifest
from .._runner.bound import ensure_triton_allocator
from .._runner.rank import RankState, whole_device_grids
from ..errors import ManifestError

#: Bytes written before each timed launch to evict the L2 of the last one's operands (as the bench's timer).
FLUSH_BYTES = 256 * 2**20
#: The compute kernels of ovl's GEMM operators: a transformed built-in body.
COMPUTE_KINDS = ("local-consumer", "local-producer")
#: Largest relative error (Frobenius) of a bf16 GEMM against the fp32 reference (the bench's bar).
REL_TOLERANCE = 2e-2


class _OwnPeers:
    """Every rank's buffer is this rank's own: the GEMM alone never reads a peer, but the manifest's tables and host
    copies are built with addresses."""

    def __init__(self, state: RankState) -> None:
        self.state = state

    def flat(self, buffer: str, rank: int) -> torch.Tensor:
        return self.state.tensors[buffer].view(-1)

    def pointers(self, buffer: str) -> list[int]:
        return [int(self.state.tensors[buffer].data_ptr())] * self.state.world


class BufferPool:
    """Buffers shared by the candidates of one shape (they run one at a time): one allocation per name and shape."""

    def __init__(self) -> None:
        self.tensors: dict[tuple[str, tuple[int, ...], Any], torch.Tensor] = {}

    def __call__(self, b: BufferSpec, dtype: Any) -> torch.Tensor:
        k = (b.name, tuple(b.shape), dtype)
        if k not in self.tensors:
            self.tensors[k] = torch.empty(*b.shape, dtype=dtype, device="cuda")
        return self.tensors[k]


class ComputeKernel:
    """The compute kernel of manifest ``m`` loaded on this GPU, launched alone with every wait target 0."""

    def __init__(self, m: Manifest, num_sms: int, pool: BufferPool) -> None:
        ensure_triton_allocator()
        self.m = m
        self.state = RankState(m, 0, num_sms, pool)
        self.state.connect(_OwnPeers(self.state), whole_device_grids(m, num_sms))
        kds = [kd for kd in self.state.kernels if kd["spec"].template_kind in COMPUTE_KINDS]
        if len(kds) != 1:
            raise ManifestError(f"{m.name}.kernels", f"has {len(kds)} GEMM kernels ({', '.join(COMPUTE_KINDS)}); tuning times one")
        self.kd = kds[0]
        p = self.kd["spec"].template_params
        self.a, self.b, self.c = (self.state.tensors[str(p[x])] for x in ("a", "b", "c"))
        self.grid = self.kd["grid"]

    def launch(self) -> None:
        self.state.launch_kernel(self.kd, warm=True)

    def check(self, M: int, N: int, K: int, seed: int = 0) -> float:
        """Launch once on random operands (the output poisoned first) and return the relative error against the
        fp32 reference; NaN where an element was never written. @raises ManifestError for operands not [M, K] @ [K, N]."""
        if (self.a.numel(), self.b.numel(), self.c.numel()) != (M * K, K * N, M * N):
            raise ManifestError(f"{self.m.name}.buffers", f"the GEMM's operands are not [{M}, {K}] @ [{K}, {N}] -> [{M}, {N}]")
        g = torch.Generator(device="cuda").manual_seed(seed)
        a, b, c = self.a.view(M, K), self.b.view(K, N), self.c.view(M, N)
        a.copy_(torch.randn(M, K, generator=g, device="cuda"))
        b.copy_(torch.randn(K, N, generator=g, device="cuda"))
        c.fill_(float("nan"))
        self.launch()
        torch.cuda.synchronize()
        if int(self.state.err[0].item()) != 0:
            raise ManifestError(f"{self.m.name}", "a wait gave up although every wait target was 0")
        ref = a.float() @ b.float()
        err = float((c.float() - ref).norm() / ref.norm())
        return err if bool(torch.isfinite(c).all()) else float("nan")


class Cublas:
    """``torch.matmul`` (cuBLAS) at the GEMM ``[M, K] @ [K, N]`` in bf16."""

    def __init__(self, M: int, N: int, K: int) -> None:
        self.a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        self.c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def launch(self) -> None:
        torch.matmul(self.a, self.b, out=self.c)


def sweeps(members: list[Callable[[], None]], count: int, warmup: int = 2) -> list[list[float]]:
    """Each member's launch time (ms) in each of ``count`` sweeps, aligned by sweep: a sweep launches every member
    once, the L2 flushed before each launch, CUDA events around it, the order rotated by one member per sweep.

    A GPU whose clocks move (a power cap, heat: an H200 measured 1.39 then 1.63 ms for the same cuBLAS GEMM within
    one shape's rounds) moves every member of a sweep alike, so a ratio within a sweep (:func:`.select.relative`)
    cancels the drift that medians over separate rounds of one member each carry. ``warmup`` untimed sweeps first.
    @raises ValueError for no members or ``count`` < 1."""
    if not members or count < 1:
        raise ValueError(f"sweeps: {len(members)} members, {count} sweeps: need at least one of each")
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    n = len(members)
    for _ in range(warmup):
        for fn in members:
            flush.zero_()
            fn()
    torch.cuda.synchronize()
    events: list[list[tuple[torch.cuda.Event, torch.cuda.Event]]] = [[] for _ in members]
    for r in range(count):
        for j in range(n):
            i = (j + r) % n
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            members[i]()
            end.record()
            events[i].append((start, end))
    torch.cuda.synchronize()
    del flush
    return [[s.elapsed_time(e) for s, e in ev] for ev in events]
