"""A compiled operator bound to a group: allocated once, launched on the caller's tensors.

The runner's GPU modes allocate every buffer a manifest lists and fill it with random data;
a model instead brings its own tensors on each call. :class:`BoundOperator` keeps the
buffers peers address (symmetric buffers, signal slots, anything a host op copies) and,
for the operator's other inputs and its output, passes the caller's tensors straight to the
kernels (``RankState.bind``): no copy of the weights, a fresh output per call. An input held
in a symmetric buffer (the gathered operand of AllGather+GEMM) is copied into this rank's
rows of it, on the caller's stream, before the launch.

A call enqueues work on the current stream and returns: nothing waits on the host. Waits
are bounded on the device; :meth:`BoundOperator.check` synchronises and raises a
``WaitTimeout`` naming rank, slot, value seen and expected. Calls can be captured in a CUDA
graph once the operator has run eagerly (the first call compiles and loads every kernel):
the epoch each replay waits for is read from a word on the device that the launch itself
advances, and the copies and their signals are captured work. Operators whose kernels take
host-side epochs are refused here (TLX cubins are bound like Triton kernels: the TLX backend's kernels read
the epoch on the device too, and a captured ``cuLaunchKernelEx`` is a kernel node whose packed arguments
:mod:`~ovl_runtime._runner.graph_params` rewrites as it does a Triton launch's); operators whose host streams wait on a
signal (copy-engine deliveries that wait for tiles, a copy-engine GEMM+AllReduce's gather,
pull rings) run eagerly, but their capture is refused: the wait's value is the host's epoch,
which a CUDA graph would freeze. (A launch's last wait over SM transfers is a ``slot-wait``
kernel, on the device.)

An eager call replays a CUDA graph of the operator's own launch (its copies, signal writes and kernels on
every stream, captured on the second call): the host then pays one graph launch instead of every copy and
kernel launch from Python. The caller's tensors the kernels take by address (a weight, the output) change
from call to call; their addresses are rewritten in the executable graph's kernel parameters before the
replay (:mod:`ovl_runtime._runner.graph_params`). ``OVL_EAGER_GRAPH=0`` launches every call directly (for
comparisons); an operator a graph cannot capture always does.

Modes: a :class:`~ovl_runtime.groups.OneGpuGroup` (every rank in this process, one GPU —
for checking correctness; tensors carry the rank as their leading dimension) or a
:class:`~ovl_runtime.groups.DistGroup` (one rank per process under torchrun; symmetric memory).
Imports torch: GPU only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

from .._manifest.types import CopyOp, Manifest
from ..errors import UsageError
from ..groups import DistGroup, OneGpuGroup
from .graph_params import AddressKey, GraphParamsError
from .own_graph import OwnGraph
from .rank import HOST_EPOCH_KINDS, RankState

#: Set to 1 to synchronise and check the wait bounds after every call (debugging).
CHECK_EACH_CALL = os.environ.get("OVL_CHECK_EACH_CALL", "0") == "1"
#: Set to 0 to launch every eager call directly instead of replaying the operator's own graph.
EAGER_GRAPH = os.environ.get("OVL_EAGER_GRAPH", "1") != "0"


def _torch_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def ensure_triton_allocator() -> None:
    """Kernels that build TMA descriptors on the device need Triton's scratch allocator: give
    it torch's (from a CUDA graph's pool while capturing) unless the caller set one."""
    import triton

    try:
        from triton.runtime import _allocation

        if not isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
            return
    except (ImportError, AttributeError):
        pass
    triton.set_allocator(_torch_scratch)


def host_buffers(m: Manifest) -> set[str]:
    """Buffers a host op reads or writes: their views are fixed when a rank connects."""
    out: set[str] = set()
    for h in m.host_ops:
        for s in h.streams:
            for op in s.ops:
                if isinstance(op, CopyOp):
                    out.update((op.src.buffer, op.dst.buffer))
    return out


def refusal(m: Manifest) -> str | None:
    """Why the torch API cannot run ``m`` at all (host-side epochs in its kernels), or None. Precompiled (TLX)
    kernels are bound like Triton ones when they read the epoch on the device (an ``epoch-word`` argument, as
    the TLX backend emits them); a cubin compiled for a host-side epoch is refused with the others."""
    host_epoch = [f"{k.name}.{n}" for k in m.kernels for n, a in k.args if a.kind in HOST_EPOCH_KINDS]
    if host_epoch:
        precompiled = any(k.precompiled is not None for k in m.kernels)
        how = (
            "re-emit it with this @ovl/tlx-emitter (its TLX kernels take an epoch-word) and AOT-compile it again"
            if precompiled
            else "recompile with the compile path: epoch-word"
        )
        return f"kernel arguments {', '.join(host_epoch)} take the epoch from the host ({how})"
    return None


def backend_of(m: Manifest) -> str:
    """The backend whose kernels ``m`` runs: ``tlx`` when a kernel is a precompiled (TLX) cubin, else ``triton``."""
    return "tlx" if any(k.precompiled is not None for k in m.kernels) else "triton"


def capture_refusal(m: Manifest) -> str | None:
    """Why a CUDA graph cannot capture ``m``'s launches (host streams that wait with the host's
    epoch), or None."""
    if any(not isinstance(op, CopyOp) for h in m.host_ops for s in h.streams for op in s.ops):
        return (
            "its transfers wait on the host, with values a CUDA graph would freeze (copy-engine deliveries that wait "
            "for tiles, or a pull ring): compile it with device-side waits (GEMM+ReduceScatter: --backend sm; "
            "AllGather: a push plan)"
        )
    return None


class BoundOperator:
    """One compiled operator on one group, launched epoch after epoch on the callers' tensors."""

    def __init__(self, m: Manifest, group: OneGpuGroup | DistGroup) -> None:
        why = refusal(m)
        if why is not None:
            raise UsageError(f"{m.name}: the torch API cannot run this manifest: {why}")
        if m.world != group.world:
            raise UsageError(f"{m.name} is compiled for {m.world} ranks, but the group has {group.world}")
        self.m, self.group = m, group
        #: Whose kernels this operator launches: ``tlx`` (precompiled warp-specialised cubins) or ``triton``.
        self.backend = backend_of(m)
        self.stacked = isinstance(group, OneGpuGroup)
        ref = m.reference
        fixed = host_buffers(m)
        names = [*ref.inputs.values(), ref.output]
        self.bindable = frozenset(n for n in names if not m.buffer(n).symmetric and n not in fixed)
        ensure_triton_allocator()
        num_sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        if isinstance(group, OneGpuGroup):
            from .onegpu import OneGpuWorld

            self.world: Any = OneGpuWorld(m, num_sms, group.reserve, bound=self.bindable)
            self.ranks: list[RankState] = list(self.world.ranks)
        else:
            from .session import GpuSession

            self.world = GpuSession(m, group.rank, num_sms, group=group.pg, bound=self.bindable)
            self.ranks = [self.world]
        self.uncapturable = capture_refusal(m)
        #: The operator's own graph (eager calls replay it), None before the second call or where it cannot be
        #: used; ``direct_reason`` says why eager calls launch directly.
        self.own: OwnGraph | None = None
        self.direct_reason: str | None = None if EAGER_GRAPH else "OVL_EAGER_GRAPH=0"
        if self.uncapturable is not None:
            self.direct_reason = self.uncapturable
        self.warmed = False
        self.captured = False
        self.closed = False
        self.calls = 0

    # ---- one call ----
    def run(self, inputs: Mapping[str, torch.Tensor], output: torch.Tensor) -> None:
        """Enqueue one launch on the caller's tensors: ``inputs`` by reference key (``A``, ``B``, ...) and
        ``output``, each holding every rank of this process (stacked along dimension 0 in the one-GPU mode;
        this rank's own under torchrun)."""
        if self.closed:
            raise UsageError(f"{self.m.name}: this operator was closed; its buffers are freed")
        capturing = torch.cuda.is_current_stream_capturing()
        if capturing and not self.warmed:
            raise UsageError(
                f"{self.m.name}: the first call compiles and loads its kernels, which a CUDA graph capture cannot do: "
                "call the operator once before capturing"
            )
        if capturing and self.uncapturable is not None:
            raise UsageError(f"{self.m.name}: a CUDA graph cannot capture this operator: {self.uncapturable}")
        if not capturing and self.warmed and self.direct_reason is None:
            if self._replay(inputs, output):
                self.calls += 1
                if CHECK_EACH_CALL:
                    self.check()
                return
        self._stage(inputs, output)
        if not self.warmed:
            self._launch(warm=True)
            self.sync()
            self.warmed = True
        self._launch(warm=False)
        self._unstage(output)
        if capturing:
            self.captured = True
        else:
            self.calls += 1
        if CHECK_EACH_CALL and not capturing:
            self.check()

    def _views(self, t: torch.Tensor) -> list[torch.Tensor]:
        """The per-rank views of a caller's tensor, in the order of ``self.ranks``."""
        return list(t.unbind(0)) if self.stacked else [t]

    def _addresses(self, t: torch.Tensor) -> list[int]:
        """The device address of each rank's view of ``t`` (without making the views)."""
        base = t.data_ptr()
        if not self.stacked:
            return [base]
        step = t.stride(0) * t.element_size()
        return [base + i * step for i in range(len(self.ranks))]

    def _stage(self, inputs: Mapping[str, torch.Tensor], output: torch.Tensor) -> None:
        """Before a launch: the caller's inputs copied into the operator's buffers or bound, its output bound."""
        ref = self.m.reference
        views = {key: self._views(inputs[key]) for key in ref.inputs}
        outs = self._views(output)
        for i, s in enumerate(self.ranks):
            for key, buffer in ref.inputs.items():
                self._put(s, buffer, views[key][i])
            if ref.output in self.bindable:
                s.bind(ref.output, outs[i])

    def _unstage(self, output: torch.Tensor) -> None:
        """After a launch: an output the kernels write into the operator's own buffer, copied to the caller's."""
        if self.m.reference.output not in self.bindable:
            for s, out in zip(self.ranks, self._views(output), strict=True):
                out.copy_(s.tensors[self.m.reference.output].view(out.shape))

    def _replay(self, inputs: Mapping[str, torch.Tensor], output: torch.Tensor) -> bool:
        """This call as a replay of the operator's own graph (staging, launch and copies out), captured on first
        use; False where this call must launch directly instead."""
        ref = self.m.reference
        addresses: dict[AddressKey, int] = {}
        for key, buffer in ref.inputs.items():
            for i, a in enumerate(self._addresses(inputs[key])):
                addresses[(i, buffer)] = a
        for i, a in enumerate(self._addresses(output)):
            addresses[(i, ref.output)] = a
        if self.own is None:
            if len(set(addresses.values())) < len(addresses):
                return False  # aliased tensors: their sites could not be told apart; capture on a later call

            def launch() -> None:
                self._stage(inputs, output)
                self._launch(warm=False)
                self._unstage(output)

            try:
                self.own = OwnGraph(launch, addresses)
            except GraphParamsError as exc:
                # The capture ran nothing: this call, and every later one, launches directly.
                self.direct_reason = f"its own graph cannot be replayed: {exc}"
                return False
        self.own.replay(addresses)
        return True

    def copy_buffer(self, buffer: str, output: torch.Tensor) -> None:
        """Copy the operator's own buffer ``buffer`` as the last launch left it into ``output`` (every rank of this
        process, as :meth:`run` takes it), in stream order: the operand buffer of an AllGather+GEMM (``A``) holds
        every rank's rows once the launch is done, an AllToAll+GEMM's (``A``; the caller's rows go to ``A_send``)
        what every rank sent this one (the next call's barrier keeps peers' pushes out of it until this copy has
        run)."""
        if buffer not in {b.name for b in self.m.buffers} or buffer in self.bindable or buffer == self.m.signals.buffer:
            raise UsageError(f"{self.m.name}: {buffer!r} is not one of the operator's own data buffers")
        for s, out in zip(self.ranks, self._views(output), strict=True):
            out.copy_(s.tensors[buffer].view(out.shape))

    def _put(self, s: RankState, buffer: str, x: torch.Tensor) -> None:
        if buffer in self.bindable:
            s.bind(buffer, x)
            return
        t = s.tensors[buffer]
        if tuple(x.shape) == tuple(t.shape):
            t.copy_(x)
        elif t.dim() == x.dim() and t.shape[0] == self.m.world * x.shape[0] and t.shape[1:] == x.shape[1:]:
            rows = x.shape[0]
            t[s.rank * rows : (s.rank + 1) * rows].copy_(x)  # this rank's rows of a gathered operand
        else:
            raise UsageError(f"{self.m.name}: an input of shape {tuple(x.shape)} does not fit buffer {buffer} {tuple(t.shape)}")

    def _launch(self, warm: bool) -> None:
        if isinstance(self.group, OneGpuGroup):
            self.world.launch(warm=warm, timed=False)
        else:
            # A device-side barrier of the group first: no peer's transfer of this call may
            # land while this rank still reads the previous call's data (it runs after the
            # previous call in stream order, and is captured with the launch).
            self.world.handles[self.m.signals.buffer].barrier(channel=0)
            self.world.launch(warm=warm)

    # ---- errors ----
    def sync(self) -> None:
        """Wait for every launch so far (bounded) and raise the first wait that timed out."""
        self.world.sync()
        self.world.raise_wait_errors()

    def check(self) -> None:
        """Synchronise and raise ``WaitTimeout`` if any wait of any launch so far gave up."""
        self.sync()

    def close(self, force: bool = False) -> None:
        """Free the operator's buffers. Refused while a CUDA graph may replay its launches
        (``force``: the caller has deleted every such graph)."""
        if self.captured and not force:
            raise UsageError(
                f"{self.m.name}: a CUDA graph captured this operator and would replay into freed buffers; "
                "delete the graph, then close(force=True)"
            )
        if self.closed:
            return
        torch.cuda.synchronize()
        self.own = None
        if isinstance(self.group, OneGpuGroup):
            self.world.streams.close()
        self.closed = True
        self.ranks = []
        self.world = None
