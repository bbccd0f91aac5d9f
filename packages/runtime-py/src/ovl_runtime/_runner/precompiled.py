"""A precompiled (cubin) kernel of one rank's GPU session: loaded once, launched each epoch.

The arguments resolve as for Triton kernels (buffers, tables and peer-pointer tables to
device addresses, scalars per launch), plus the ``global_scratch`` buffer the metadata
sizes per program; the rules live in the pure ``_cubin.launch``, this module only allocates
and calls the driver. Runs only on a GPU (torch, ``libcuda``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .._cubin.driver import CubinKernel, CudaDriver, persistent_grid
from .._cubin.launch import (
    DeviceAddresses,
    LaunchScalars,
    blocks_per_sm_bound,
    check_co_resident,
    check_metadata,
    cubin_values,
    launch_epoch,
)
from .._cubin.metadata import CubinError, launch_grid, load_metadata, scratch_bytes
from .._manifest.parse import precompiled_files
from .._manifest.types import KernelSpec, NumSms

# Triton's allocator hands out 128-byte-aligned scratch; torch's caching allocator aligns
# to 512, so a plain uint8 tensor satisfies every ``align`` the metadata states.
_TORCH_ALIGN = 512
_driver: CudaDriver | None = None


def driver() -> CudaDriver:
    """The process's driver binding, made after torch has made its CUDA context current."""
    global _driver
    if _driver is None:
        _driver = CudaDriver()
    return _driver


def max_active_blocks(kernel: CubinKernel) -> int:
    """CTAs of this kernel one SM holds at once (``cuOccupancyMaxActiveBlocksPerMultiprocessor``)."""
    import ctypes

    n = ctypes.c_int(0)
    d, meta = kernel.driver, kernel.meta
    d.check(
        d.lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(n), kernel.function, ctypes.c_int(meta.threads_per_block), ctypes.c_size_t(meta.shared)
        ),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    )
    return n.value


class CubinLaunch:
    """One precompiled kernel on one rank: module, grid, scratch and the static addresses."""

    def __init__(self, session: Any, k: KernelSpec, index: int, grid: tuple[int, ...] | None = None) -> None:
        cubin_path, meta_path = precompiled_files(k, index)
        self.spec = k
        self.meta = load_metadata(meta_path)
        check_metadata(self.meta, k)
        self.kernel = CubinKernel.load(driver(), cubin_path.read_bytes(), self.meta)
        # ``grid``: the rank's resolved grid where the mode decides it (one GPU: the SM budget).
        raw_grid = (
            list(grid)
            if grid is not None
            else [{"kind": "num-sms", "cap": g.cap, "reserve": g.reserve} if isinstance(g, NumSms) else g for g in k.grid]
        )
        # A persistent grid of clusters holds no more than the GPU holds at once (a GPC of an odd
        # number of SMs leaves one no pair can take).
        persistent = any(isinstance(g, NumSms) for g in k.grid)
        self.grid = (
            persistent_grid(self.kernel, raw_grid, session.num_sms)
            if persistent
            else launch_grid(raw_grid, session.num_sms, self.meta.cluster_dims)
        )
        # The smaller of the driver's answer and the metadata's bound: a wrong guess here hangs.
        per_sm = min(max_active_blocks(self.kernel), blocks_per_sm_bound(self.meta))
        check_co_resident(k, self.grid, session.num_sms, per_sm)
        self.scratch: dict[str, torch.Tensor] = {}
        for name, size in scratch_bytes(self.meta, self.grid).items():
            if size > 0:
                align = next(h.align for h in self.meta.hidden_args if h.name == name)
                if _TORCH_ALIGN % align:
                    raise CubinError(f"hidden_args.{name}", f"needs {align}-byte alignment, beyond the allocator's {_TORCH_ALIGN}")
                self.scratch[name] = torch.zeros(size, dtype=torch.uint8, device="cuda")
        m = session.m
        self.addresses = DeviceAddresses(
            buffers={name: int(t.data_ptr()) for name, t in session.tensors.items()}
            | {m.signals.buffer: int(session.sig_kernel.data_ptr())},
            tables={name: int(t.data_ptr()) for name, t in session.tables.items()},
            peers={name: int(t.data_ptr()) for name, t in session.peer_ptrs.items()},
            error=int(session.err.data_ptr()),
            epoch=int(session.epoch_word.data_ptr()),
        )
        self.warm_addresses = dataclasses.replace(self.addresses, epoch=int(session.zero_word.data_ptr()))
        self.scratch_addresses = {n: int(t.data_ptr()) for n, t in self.scratch.items()}
        self.session = session

    def rebind(self, buffer: str, address: int) -> None:
        """Pass ``address`` for every ``buffer`` argument naming ``buffer`` from the next launch on (the torch API's
        caller's tensor, ``RankState.bind``); launches already enqueued or captured keep the address they had."""
        buffers = {**self.addresses.buffers, buffer: int(address)}
        self.addresses = dataclasses.replace(self.addresses, buffers=buffers)
        self.warm_addresses = dataclasses.replace(self.warm_addresses, buffers=buffers)

    def launch(self, warm: bool) -> None:
        """Enqueue on the current stream with this epoch's scalars (see ``launch_epoch`` for warm-ups)."""
        s = self.session
        scalars = LaunchScalars(
            rank=s.rank, world=s.world, epoch=launch_epoch(self.spec, s.epoch, warm), bits=s.m.signals.bits, timeout_ns=s.m.wait_timeout_ns
        )
        addresses = self.warm_addresses if scalars.epoch == 0 else self.addresses
        values = cubin_values(self.meta, self.spec, addresses, scalars, self.scratch_addresses)
        # Packed once, then rewritten where a value changed (``_cubin.driver.ArgPacker``): the host's time per launch.
        self.kernel.launch(self.grid, values, stream=int(torch.cuda.current_stream().cuda_stream))
