"""Launch ahead-of-time compiled kernels (cubin + metadata, :mod:`.metadata`) through the CUDA driver API: the
arguments packed into the ``void**`` array ``cuLaunchKernelEx`` takes, and the cubin loaded and launched with ctypes
on ``libcuda.so.1``. Everything but ``CudaDriver`` / ``CubinKernel.load`` / ``launch`` is pure and runs without a GPU.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .metadata import (
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
    DEFAULT_SHARED_LIMIT,
    CubinError,
    CubinMetadata,
    cap_clusters,
    launch_grid,
)

_RANGES = {"ptr": (0, (1 << 64) - 1), "i32": (-(1 << 31), (1 << 32) - 1), "i64": (-(1 << 63), (1 << 64) - 1)}
_CTYPES = {"ptr": ctypes.c_uint64, "i32": ctypes.c_int32, "i64": ctypes.c_int64}


@dataclass
class PackedArgs:
    """The ``void**`` kernel-parameter array and the values it points to (kept alive with it)."""

    params: Any
    values: list[Any]

    def __len__(self) -> int:
        return len(self.values)


def _param_order(meta: CubinMetadata) -> list[tuple[str, str]]:
    """Every parameter's name and packing, in launch order: the metadata's args, then the hidden scratch pointers."""
    return [(a.name, a.pack) for a in meta.args] + [(h.name, "ptr") for h in meta.hidden_args]


def _checked_value(meta: CubinMetadata, name: str, pack: str, v: object) -> int:
    """``v`` as the ``pack`` slot holds it (an i32 given as its unsigned bit pattern wraps). @raises CubinError out of range."""
    lo, hi = _RANGES[pack]
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise CubinError(f"args.{name}", f"{v!r} is not a {pack} value")
    return v - (1 << 32) if pack == "i32" and v >= 1 << 31 else v


def pack_args(meta: CubinMetadata, values: Mapping[str, int]) -> PackedArgs:
    """Pack every parameter (the metadata's args, then the hidden scratch pointers) in order.

    ``values`` maps each parameter name to an integer: a device address for ``ptr``, the
    value for ``i32`` / ``i64`` (an i32 may be given as its unsigned bit pattern). A hidden
    scratch pointer may be left out only when the kernel needs no scratch (it is then null):
    device-side TMA descriptors are written into the global scratch. @raises CubinError for missing, extra or
    out-of-range values.
    """
    hidden = [h.name for h in meta.hidden_args]
    extra = sorted(set(values) - {a.name for a in meta.args} - set(hidden))
    if extra:
        raise CubinError("args", f"kernel {meta.entry} has no parameter {', '.join(extra)}")
    scratch_needed = {h.name: h.bytes_per_program for h in meta.hidden_args}
    slots: list[Any] = []
    for name, pack in _param_order(meta):
        if name not in values:
            if name in hidden and scratch_needed.get(name, 0) == 0:
                slots.append(_CTYPES["ptr"](0))
                continue
            raise CubinError(f"args.{name}", f"kernel {meta.entry} needs a value for {name}")
        slots.append(_CTYPES[pack](_checked_value(meta, name, pack, values[name])))
    params = (ctypes.c_void_p * len(slots))(*[ctypes.cast(ctypes.pointer(s), ctypes.c_void_p) for s in slots])
    return PackedArgs(params=params, values=slots)


class ArgPacker:
    """A kernel's parameter array packed once (``pack_args``) and, on later launches, rewritten
    in place where a value changed (each checked as ``pack_args`` checks it): a launch of a
    persistent operator changes only its epoch scalars, so the host no longer builds the
    ctypes array anew each time. ``cuLaunchKernelEx`` copies the parameters when it enqueues,
    so rewriting the array after a launch leaves that launch as it was."""

    def __init__(self, meta: CubinMetadata) -> None:
        self.meta = meta
        # Each parameter's position in the array and its packing.
        self._slots = {name: (i, pack) for i, (name, pack) in enumerate(_param_order(meta))}
        self._packed: PackedArgs | None = None
        self._last: dict[str, int] = {}

    def pack(self, values: Mapping[str, int]) -> PackedArgs:
        """The parameter array holding ``values``. @raises CubinError as ``pack_args``."""
        if self._packed is None or values.keys() != self._last.keys():
            self._packed = pack_args(self.meta, values)
            self._last = dict(values)
            return self._packed
        for name, v in values.items():
            if v != self._last[name]:
                i, pack = self._slots[name]
                self._packed.values[i].value = _checked_value(self.meta, name, pack, v)
                self._last[name] = v
        return self._packed


class CUlaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute``: an id, padding to 8 bytes, and a 64-byte value union (here the cluster dims)."""

    _fields_ = [("id", ctypes.c_uint32), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint32 * 16)]


class CUlaunchConfig(ctypes.Structure):
    """``CUlaunchConfig`` of ``cuLaunchKernelEx``."""

    _fields_ = [
        ("gridDimX", ctypes.c_uint32),
        ("gridDimY", ctypes.c_uint32),
        ("gridDimZ", ctypes.c_uint32),
        ("blockDimX", ctypes.c_uint32),
        ("blockDimY", ctypes.c_uint32),
        ("blockDimZ", ctypes.c_uint32),
        ("sharedMemBytes", ctypes.c_uint32),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(CUlaunchAttribute)),
        ("numAttrs", ctypes.c_uint32),
    ]


def launch_config(meta: CubinMetadata, grid: tuple[int, int, int], stream: int) -> tuple[CUlaunchConfig, Any]:
    """The launch configuration (and its attribute array, to keep alive): block = threads, dynamic shared = metadata's, a cluster attribute when the cluster is not 1x1x1."""
    attrs = (CUlaunchAttribute * 1)()
    n = 0
    if meta.cluster_dims != (1, 1, 1):
        attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attrs[0].value[0], attrs[0].value[1], attrs[0].value[2] = meta.cluster_dims
        n = 1
        for i, (g, c) in enumerate(zip(grid, meta.cluster_dims)):
            if g % c != 0:
                raise CubinError(f"grid[{i}]", f"{g} programs are not whole clusters of {c}")
    cfg = CUlaunchConfig(grid[0], grid[1], grid[2], meta.threads_per_block, 1, 1, meta.shared, ctypes.c_void_p(stream), attrs, n)
    return cfg, attrs


class CudaDriver:
    """The few driver calls a launch needs, through ctypes on ``libcuda.so.1`` (needs a GPU)."""

    def __init__(self, library: str = "libcuda.so.1") -> None:
        try:
            self.lib = ctypes.CDLL(library)
        except OSError as e:
            raise CubinError("driver", f"cannot load {library}: {e}; precompiled kernels need an NVIDIA driver") from e
        self.check(self.lib.cuInit(0), "cuInit")

    def check(self, status: int, call: str) -> None:
        if status != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(status, ctypes.byref(name))
            raise CubinError("driver", f"{call} failed with {name.value.decode() if name.value else status}")


class CubinKernel:
    """A loaded precompiled kernel: module, function, metadata."""

    def __init__(self, driver: CudaDriver, function: ctypes.c_void_p, module: ctypes.c_void_p, meta: CubinMetadata) -> None:
        self.driver, self.function, self.module, self.meta = driver, function, module, meta
        self._packer = ArgPacker(meta)
        # (grid, stream) -> the launch configuration and its attribute array (kept alive with it).
        self._configs: dict[tuple[tuple[int, int, int], int], tuple[CUlaunchConfig, Any]] = {}

    @classmethod
    def load(cls, driver: CudaDriver, cubin: bytes, meta: CubinMetadata) -> CubinKernel:
        """``cuModuleLoadData`` + ``cuModuleGetFunction``; opts in to the dynamic shared memory the kernel needs (in the current CUDA context, e.g. torch's)."""
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        driver.check(driver.lib.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(cubin)), "cuModuleLoadData")
        driver.check(
            driver.lib.cuModuleGetFunction(ctypes.byref(function), module, meta.entry.encode()), f"cuModuleGetFunction({meta.entry})"
        )
        if meta.shared > DEFAULT_SHARED_LIMIT:
            driver.check(
                driver.lib.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, meta.shared),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            )
        return cls(driver, function, module, meta)

    def max_active_clusters(self) -> int:
        """Clusters of this cluster kernel the GPU holds at once (``cuOccupancyMaxActiveClusters``):
        what a persistent grid of clusters may launch, since a GPC of an odd number of SMs leaves
        one no cluster of two can take. @raises CubinError for a kernel without clusters."""
        if self.meta.cluster_dims == (1, 1, 1):
            raise CubinError("cluster_dims", f"{self.meta.entry} is not a cluster kernel")
        n = ctypes.c_int(0)
        x, y, z = self.meta.cluster_dims
        cfg, _attrs = launch_config(self.meta, (x * 64, y, z), 0)
        self.driver.check(
            self.driver.lib.cuOccupancyMaxActiveClusters(ctypes.byref(n), self.function, ctypes.byref(cfg)), "cuOccupancyMaxActiveClusters"
        )
        return n.value

    def launch(self, grid: tuple[int, int, int], values: Mapping[str, int], stream: int = 0) -> None:
        """``cuLaunchKernelEx`` on ``stream`` (a ``CUstream`` handle, e.g. ``torch.cuda.current_stream().cuda_stream``)."""
        packed = self._packer.pack(values)
        key = (cast("tuple[int, int, int]", tuple(grid)), stream)
        if key not in self._configs:
            self._configs[key] = launch_config(self.meta, grid, stream)
        cfg, _attrs = self._configs[key]
        self.driver.check(
            self.driver.lib.cuLaunchKernelEx(ctypes.byref(cfg), self.function, packed.params, None), f"cuLaunchKernelEx({self.meta.entry})"
        )


def persistent_grid(kernel: CubinKernel, grid: Sequence[Any], num_sms: int) -> tuple[int, int, int]:
    """``launch_grid`` of a persistent ``grid`` in ``kernel``'s clusters, cut for a cluster kernel to the
    clusters the GPU holds at once (``kernel.max_active_clusters()``, asked only then; ``cap_clusters``)."""
    cluster = kernel.meta.cluster_dims
    dims = launch_grid(grid, num_sms, cluster)
    return dims if cluster == (1, 1, 1) else cap_clusters(dims, cluster, kernel.max_active_clusters())
