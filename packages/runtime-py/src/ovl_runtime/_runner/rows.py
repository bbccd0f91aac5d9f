"""One compiled operator serving every row count of a range (``ovl emit
ag-gemm|gemm-rs|gemm-ar|a2a-gemm|ag-moe|moe-rs|ag-attention --any-rows``; ag-attention's rows are its sequence length),
bound to a group.

A call brings its row count M. Where the compiler says overlapping does not pay at M (``rows.fallbackBelow``, the
simulator's crossover) or M is outside what the operator serves, the call runs the operator's plain sequence instead
(:mod:`ovl_runtime._runner.rows_plain`: the group's gather or all-to-all then one matmul or the grouped expert GEMM, or the matmul then the
group's reduce-scatter or all-reduce) and the operator records why (:meth:`RowsOperator.path`). A row count the operator cannot take at
all (not a multiple of the world, none) is refused before anything runs. Otherwise the manifest
is made concrete at M (``_manifest.rows.instantiate``) and bound (:class:`~ovl_runtime._runner.bound.BoundOperator`):
the kernel is the same compiled one for every M (its row-count arguments are not specialised, so no new Triton
compile), the buffers and the own graph are per M. The most recently used row counts stay bound; older ones are
freed. Imports torch: GPU only.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch

from .._manifest.parse import instantiate
from .._manifest.types import Manifest
from .._torch_api.collectives import gather_rows
from .._torch_api.fp8 import scaled_matmul
from .._torch_api.tensors import DTYPES, FP8, GPU_DTYPES
from ..errors import UsageError
from ..groups import DistGroup, EmulatedGroup, OneGpuGroup
from .agreement import same_everywhere
from .bound import BoundOperator
from .emulated import EmulatedOperator
from .rows_plain import PLAIN

log = logging.getLogger("ovl_runtime")

#: Row counts kept bound per operator (each holds its buffers and its own graph).
KEEP = 4


class RowsOperator:
    """An operator of ``PLAIN`` (AllGather+GEMM, GEMM+ReduceScatter, GEMM+AllReduce, AllToAll+GEMM, AllGather+MoE,
    MoE+ReduceScatter, AllGather+attention) for every row count of ``m.rows`` on ``group``
    (see the module docstring)."""

    def __init__(self, m: Manifest, group: OneGpuGroup | DistGroup | EmulatedGroup) -> None:
        if m.rows is None:
            raise UsageError(f"{m.name} is compiled for one row count; bind it with BoundOperator")
        plain = PLAIN.get(m.reference.operator)
        if plain is None:
            raise UsageError(f"{m.name}: any row count is run for {', '.join(PLAIN)}, not {m.reference.operator}")
        self.m, self.group, self.rows, self.plain = m, group, m.rows, plain.for_manifest(m)
        self.bound: OrderedDict[int, BoundOperator] = OrderedDict()
        self.closed = False
        self.calls = 0
        self.fallbacks = 0
        self._told: set[str] = set()
        #: Row counts every rank was seen to call with (under torchrun: checked once per row count, either path).
        self._agreed: set[int] = set()
        self._gathered: torch.Tensor | None = None

    def path(self, M: int) -> str:
        """How a call of ``M`` rows runs: ``"overlapped"``, or ``"not overlapped: <why>"``."""
        r = self.rows
        if not r.serves(M):
            return f"not overlapped: {M} rows are outside the {r.min}..{r.max} (multiples of {r.multiple}) the operator serves"
        if r.fallback_below is not None and M < r.fallback_below:
            return f"not overlapped below {r.fallback_below} rows: {r.fallback_reason or 'the compiler says overlapping loses there'}"
        return "overlapped"

    # ---- one call ----
    def run(self, inputs: Mapping[str, torch.Tensor], output: torch.Tensor) -> None:
        """Enqueue one call (the tensors as :meth:`BoundOperator.run` takes them)."""
        if self.closed:
            raise UsageError(f"{self.m.name}: this operator was closed; its buffers are freed")
        x, w = (inputs[name] for name in self.plain.inputs)
        M = self.plain.rows(x, self.m.world)
        self._check(x, w, M)
        self._agree(M)
        path = self.path(M)
        self.calls += 1
        if path != "overlapped":
            if path not in self._told:
                self._told.add(path)
                log.info("%s at %d rows: %s; running %s", self.m.name, M, path, self.plain.what)
            self.fallbacks += 1
            if "scale_a" in inputs:  # fp8 AllGather+GEMM: B is Bt [N, K], the output scaled (torch._scaled_mm's semantics)
                self._gathered = gather_rows(x.view(torch.uint8), self.group).view(x.dtype)
                scaled_matmul(self._gathered, w, inputs["scale_a"], inputs["scale_b"], output)
                return
            self._gathered = self.plain.run(x, w, output, self.group, *(inputs[n] for n in self.plain.more))
            return
        self._gathered = None
        self._at(M).run(inputs, output)

    def _at(self, M: int) -> BoundOperator:
        op = self.bound.get(M)
        if op is not None and not op.closed:
            self.bound.move_to_end(M)
            return op
        if not isinstance(self.group, EmulatedGroup) and torch.cuda.is_current_stream_capturing():
            raise UsageError(
                f"{self.m.name}: the first call at {M} rows binds the operator there (buffers, a warm-up launch), which a "
                "CUDA graph capture cannot do: call it once at this row count before capturing"
            )
        if len(self.bound) >= KEEP:
            # The least recently used row count a caller's graph cannot replay (those stay until the operator closes).
            for key, old in list(self.bound.items()):
                if not old.captured:
                    del self.bound[key]
                    old.close()
                    break
        concrete = instantiate(self.m, M)
        op = EmulatedOperator(concrete, self.group) if isinstance(self.group, EmulatedGroup) else BoundOperator(concrete, self.group)
        self.bound[M] = op
        return op

    def _agree(self, M: int) -> None:
        """Under torchrun, the first call at ``M`` rows checks that every rank calls with ``M`` (a host collective), on
        the plain path as on the overlapped one: ranks that disagree would otherwise wait on each other's collectives
        or signals. @raises UsageError when they disagree, or when that first call is being captured in a CUDA graph."""
        if M in self._agreed:
            return
        if isinstance(self.group, DistGroup) and torch.cuda.is_current_stream_capturing():
            raise UsageError(
                f"{self.m.name}: the first call at {M} rows checks that every rank passes {M} rows (a host collective), "
                "which a CUDA graph capture cannot do: call it once at this row count before capturing"
            )
        same_everywhere(self.group, ("rows", self.m.name, M), self.m.name)
        self._agreed.add(M)

    def _check(self, x: torch.Tensor, w: torch.Tensor, M: int) -> None:
        """Refuse a call no path can run, before any launch: no rows, rows that do not split over the ranks, or
        operands of another element type than the operator's."""
        world = self.m.world
        if M <= 0 or M % world:
            raise UsageError(f"{self.m.name}: {M} rows do not split over {world} ranks (M must be a positive multiple of {world})")
        # An emulated group also takes float32 (the emulation computes in float32 whatever the kernels' type).
        types = {**(DTYPES if isinstance(self.group, EmulatedGroup) else GPU_DTYPES), FP8: "fp8e4m3"}
        for name, t in zip(self.plain.inputs, (x, w), strict=True):
            if types.get(t.dtype) != self.m.dtype:
                raise UsageError(f"{self.m.name}: {name} is {t.dtype}; the operator is compiled for {self.m.dtype}")

    def copy_buffer(self, buffer: str, output: torch.Tensor) -> None:
        """The moved operand of the last call (``A``: the gathered or exchanged rows), as :meth:`BoundOperator.copy_buffer`."""
        if self._gathered is not None and buffer == "A":
            output.copy_(self._gathered.view(output.shape))
            return
        last = next(reversed(self.bound.values()), None)
        if last is None:
            raise UsageError(f"{self.m.name}: no call has run yet")
        last.copy_buffer(buffer, output)

    # ---- lifecycle (as BoundOperator) ----
    @property
    def captured(self) -> bool:
        return any(op.captured for op in self.bound.values())

    def check(self) -> None:
        for op in self.bound.values():
            if not op.closed:
                op.check()

    def close(self, force: bool = False) -> None:
        for op in self.bound.values():
            op.close(force=force)
        self.bound.clear()
        self.closed = True

    def describe(self) -> dict[str, Any]:
        """What ran so far: the row counts bound, the calls, the calls that did not overlap and why."""
        return {
            "name": self.m.name,
            "bound": list(self.bound),
            "calls": self.calls,
            "notOverlapped": self.fallbacks,
            "why": sorted(self._told),
        }
