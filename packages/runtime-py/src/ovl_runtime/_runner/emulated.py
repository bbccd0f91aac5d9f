"""A compiled operator bound to an :class:`~ovl_runtime.groups.EmulatedGroup`: the operator's manifest, found or
compiled exactly as for the GPU groups (``_kernels.library``), run by the CPU emulation on the caller's tensors.

:class:`EmulatedOperator` is the CPU counterpart of :class:`~ovl_runtime._runner.bound.BoundOperator`, with its
interface (``run``, ``copy_buffer``, ``check``, ``close``), so the torch API's operators take either. A call copies
each rank's inputs (the caller's stacked ``[world, ...]`` CPU tensors) into the emulator's buffers — a rank's rows
of a gathered buffer (the AllGather's ``A``) into its slab —, launches every rank once (threads; the signal slots
kept from launch to launch, as on the GPU) and copies each rank's output back, converted to the caller's dtype.
The numpy engine (the kernel templates re-implemented; default) computes in float32 whatever the kernels' element
type; the interpreter engine runs the emitted Triton source on buffers of the manifest's own types (bf16: its
results are rounded as the GPU's). Everything is synchronous: a wait that gives up raises from the call itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .._emulate.engine import make_emulator
from .._manifest.types import Manifest
from .._reference.on_cpu import output_view
from ..errors import UsageError
from ..groups import EmulatedGroup
from .bound import BoundOperator


def _as_tensor(buf: Any) -> torch.Tensor:
    """A buffer of either engine as a CPU tensor sharing its memory (numpy arrays are wrapped, not copied)."""
    return torch.from_numpy(buf) if isinstance(buf, np.ndarray) else buf


class EmulatedOperator(BoundOperator):
    """One compiled operator on an emulated group: every launch runs on the CPU emulator (see the module docstring)."""

    def __init__(self, m: Manifest, group: EmulatedGroup) -> None:
        if m.world != group.world:
            raise UsageError(f"{m.name} is compiled for {m.world} ranks, but the group has {group.world}")
        self.m = m
        self.group = group  # type: ignore[assignment]  # BoundOperator's GPU groups, widened by this subclass
        self.stacked = True
        self.emu: Any = make_emulator(m, engine=group.engine)
        engine_buffers = self.emu.world.buffers if hasattr(self.emu, "world") else self.emu.buffers
        self.buffers: list[dict[str, torch.Tensor]] = [{name: _as_tensor(b) for name, b in bufs.items()} for bufs in engine_buffers]
        self.own = None
        self.direct_reason = "emulated on the CPU"
        self.uncapturable = "emulated on the CPU"
        self.warmed = True
        self.captured = False
        self.closed = False
        self.calls = 0

    def run(self, inputs: Mapping[str, torch.Tensor], output: torch.Tensor) -> None:
        """One launch of every rank on the caller's stacked tensors: ``inputs`` by reference key, ``output`` written."""
        if self.closed:
            raise UsageError(f"{self.m.name}: this operator was closed")
        ref = self.m.reference
        for key, buffer in ref.inputs.items():
            for r, x in enumerate(inputs[key].unbind(0)):
                self._put_rank(r, buffer, x)
        self.emu.launch()
        for r, out in enumerate(output.unbind(0)):
            full = self.buffers[r][ref.output]
            mine = output_view(self.m, full.float().numpy() if full.dtype != torch.float32 else full.numpy(), r)
            if mine.size != out.numel():
                raise UsageError(f"{self.m.name}: rank {r}'s output holds {mine.size} elements, the caller's {out.numel()}")
            out.copy_(torch.from_numpy(np.ascontiguousarray(mine)).reshape(out.shape))
        self.calls += 1

    def _put_rank(self, rank: int, buffer: str, x: torch.Tensor) -> None:
        """``x`` (one rank's input) into ``buffer``: the whole buffer, or this rank's slab of a buffer of every rank's rows."""
        flat = self.buffers[rank][buffer].view(-1)
        n = x.numel()
        if flat.numel() == n:
            flat.copy_(x.reshape(-1))
        elif flat.numel() == self.m.world * n:
            flat[rank * n : (rank + 1) * n].copy_(x.reshape(-1))
        else:
            raise UsageError(f"{self.m.name}: an input of shape {tuple(x.shape)} does not fit buffer {buffer} ({flat.numel()} elements)")

    def copy_buffer(self, buffer: str, output: torch.Tensor) -> None:
        """Copy the operator's own buffer ``buffer`` as the last launch left it into ``output`` (every rank's, stacked)."""
        if buffer not in self.buffers[0] or buffer == self.m.signals.buffer:
            raise UsageError(f"{self.m.name}: {buffer!r} is not one of the operator's own data buffers")
        for r, out in enumerate(output.unbind(0)):
            out.copy_(self.buffers[r][buffer].reshape(out.shape))

    def sync(self) -> None:
        """Nothing to wait for: every launch ran to its end (or raised) in :meth:`run`."""

    def check(self) -> None:
        """Nothing to check: a wait that gave up raised from the launch itself."""

    def close(self, force: bool = False) -> None:
        """Drop the emulator and its buffers."""
        self.closed = True
        self.emu = None
        self.buffers = []
