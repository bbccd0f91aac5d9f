"""Kernel arguments of an instantiated CUDA graph, rewritten in place through the CUDA driver.

An eager call of a bound operator replays a graph of its own launch (:mod:`ovl_runtime._runner.own_graph`). The
caller's tensors (an input copied into the operator's buffer, a weight, the output) change address from
call to call, and a graph holds the addresses it captured. :class:`GraphParams` finds, once per graph,
every kernel parameter and every copy's source or destination that holds one of the captured addresses
(``cuGraphKernelNodeGetParams`` and ``cuFuncGetParamInfo`` give each parameter's bytes,
``cuGraphMemcpyNodeGetParams`` a copy's ends) and, per call, writes the new addresses into the executable
graph's nodes that need them (``cuGraphExec{Kernel,Memcpy}NodeSetParams``: later launches see them,
launches already enqueued do not).

Addresses are matched by value among 8-byte-aligned words of the parameters; a graph where an address
cannot be found, or a kernel node whose parameters cannot be read, is refused. ctypes over ``libcuda``:
GPU only (the matching itself is pure and tested on the CPU: :func:`find_words`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass, field

_KERNEL_NODE = 0  # CU_GRAPH_NODE_TYPE_KERNEL
_MEMCPY_NODE = 1  # CU_GRAPH_NODE_TYPE_MEMCPY
#: A caller's tensor as the bound operator names it: (index of the rank in this process, buffer).
AddressKey = tuple[int, str]
_WORD = 8
_INVALID_VALUE = 1  # CUDA_ERROR_INVALID_VALUE


class GraphParamsError(RuntimeError):
    """The graph cannot be rewritten safely (the caller falls back to launching directly)."""


class _KernelNodeParams(ctypes.Structure):
    """``CUDA_KERNEL_NODE_PARAMS_v2``."""

    _fields_ = [
        ("func", ctypes.c_void_p),
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("kernelParams", ctypes.POINTER(ctypes.c_void_p)),
        ("extra", ctypes.POINTER(ctypes.c_void_p)),
        ("kern", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
    ]


class _Memcpy3D(ctypes.Structure):
    """``CUDA_MEMCPY3D_v2`` (only the device addresses are read)."""

    _fields_ = [
        ("srcXInBytes", ctypes.c_size_t),
        ("srcY", ctypes.c_size_t),
        ("srcZ", ctypes.c_size_t),
        ("srcLOD", ctypes.c_size_t),
        ("srcMemoryType", ctypes.c_int),
        ("srcHost", ctypes.c_void_p),
        ("srcDevice", ctypes.c_uint64),
        ("srcArray", ctypes.c_void_p),
        ("reserved0", ctypes.c_void_p),
        ("srcPitch", ctypes.c_size_t),
        ("srcHeight", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t),
        ("dstY", ctypes.c_size_t),
        ("dstZ", ctypes.c_size_t),
        ("dstLOD", ctypes.c_size_t),
        ("dstMemoryType", ctypes.c_int),
        ("dstHost", ctypes.c_void_p),
        ("dstDevice", ctypes.c_uint64),
        ("dstArray", ctypes.c_void_p),
        ("reserved1", ctypes.c_void_p),
        ("dstPitch", ctypes.c_size_t),
        ("dstHeight", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t),
        ("Height", ctypes.c_size_t),
        ("Depth", ctypes.c_size_t),
    ]


def find_words(blob: bytes, values: Mapping[int, AddressKey]) -> list[tuple[int, AddressKey]]:
    """``(byte offset, key)`` of every 8-byte-aligned little-endian word of ``blob`` equal to a value of
    ``values`` (value → key)."""
    out: list[tuple[int, AddressKey]] = []
    for off in range(0, len(blob) - _WORD + 1, _WORD):
        v = int.from_bytes(blob[off : off + _WORD], "little")
        if v in values:
            out.append((off, values[v]))
    return out


@dataclass
class _NodePatch:
    node: int
    params: _KernelNodeParams
    buffers: list[ctypes.Array]  # one per kernel parameter, the bytes handed to the driver
    argv: ctypes.Array  # void*[] over ``buffers``
    #: (parameter index, byte offset in it, key) of every word that holds a caller's address
    sites: list[tuple[int, int, AddressKey]] = field(default_factory=list)
    keys: frozenset[AddressKey] = frozenset()


@dataclass
class _CopyPatch:
    node: int
    params: _Memcpy3D
    #: (end, key): ``"src"`` or ``"dst"`` holds the caller's address of ``key``
    sites: list[tuple[str, AddressKey]]
    keys: frozenset[AddressKey]


class _Driver:
    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self.set_memcpy = lib.cuGraphExecMemcpyNodeSetParams
        self.set_memcpy.restype = ctypes.c_int
        self.current_ctx = lib.cuCtxGetCurrent
        self.get_nodes = lib.cuGraphGetNodes
        self.node_type = lib.cuGraphNodeGetType
        self.get_params = lib.cuGraphKernelNodeGetParams_v2
        self.set_params = lib.cuGraphExecKernelNodeSetParams_v2
        self.param_info = lib.cuFuncGetParamInfo
        self.kernel_param_info = getattr(lib, "cuKernelGetParamInfo", None)
        self.memcpy_params = lib.cuGraphMemcpyNodeGetParams
        for f in (self.get_nodes, self.node_type, self.get_params, self.set_params, self.param_info, self.memcpy_params, self.current_ctx):
            f.restype = ctypes.c_int

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise GraphParamsError(f"{what} failed with CUresult {rc}")


_driver: _Driver | None = None


def _lib() -> _Driver:
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def _param_layout(d: _Driver, p: _KernelNodeParams) -> list[tuple[int, int]]:
    """``(offset, size)`` of each of the node's kernel parameters."""
    out: list[tuple[int, int]] = []
    off, size = ctypes.c_size_t(), ctypes.c_size_t()
    func = p.func or None
    info = d.param_info
    handle = func
    if handle is None:
        if d.kernel_param_info is None or not p.kern:
            raise GraphParamsError("a kernel node without a function handle")
        info, handle = d.kernel_param_info, p.kern
    for i in range(4096):
        rc = info(ctypes.c_void_p(handle), ctypes.c_size_t(i), ctypes.byref(off), ctypes.byref(size))
        if rc == _INVALID_VALUE:  # past the last parameter
            break
        # Any other failure leaves the node's parameters unknown: one of them could hold a caller's address.
        d.check(rc, f"cuFuncGetParamInfo of parameter {i}")
        out.append((off.value, size.value))
    return out


class GraphParams:
    """The caller-address sites of one instantiated graph, rewritten per call (see the module docstring)."""

    def __init__(self, graph: int, graph_exec: int, addresses: Mapping[AddressKey, int]) -> None:
        """``graph``: the ``cudaGraph_t`` (kept); ``graph_exec``: its instantiation; ``addresses``: key →
        the device address the capture used for it (distinct, non-zero)."""
        by_value: dict[int, AddressKey] = {}
        for key, v in addresses.items():
            if not v:
                raise GraphParamsError(f"{key!r} has a null address")
            if v in by_value:
                raise GraphParamsError(f"{key!r} and {by_value[v]!r} share the address {v:#x}")
            by_value[v] = key
        d = _lib()
        self._exec = ctypes.c_void_p(graph_exec)
        self.current = dict(addresses)
        self.nodes: list[_NodePatch] = []
        n = ctypes.c_size_t(0)
        d.check(d.get_nodes(ctypes.c_void_p(graph), None, ctypes.byref(n)), "cuGraphGetNodes")
        handles = (ctypes.c_void_p * n.value)()
        d.check(d.get_nodes(ctypes.c_void_p(graph), handles, ctypes.byref(n)), "cuGraphGetNodes")
        self.copies: list[_CopyPatch] = []
        ctx = ctypes.c_void_p()
        d.check(d.current_ctx(ctypes.byref(ctx)), "cuCtxGetCurrent")
        self._ctx = ctx
        found: set[AddressKey] = set()
        for h in handles:
            t = ctypes.c_int()
            d.check(d.node_type(ctypes.c_void_p(h), ctypes.byref(t)), "cuGraphNodeGetType")
            if t.value == _MEMCPY_NODE:
                copy = self._inspect_copy(d, int(h or 0), by_value)
                if copy is not None:
                    self.copies.append(copy)
                    found |= copy.keys
            elif t.value == _KERNEL_NODE:
                patch = self._inspect(d, int(h or 0), by_value)
                if patch is not None:
                    self.nodes.append(patch)
                    found |= patch.keys
        missing = [k for k in addresses if k not in found]
        if missing:
            raise GraphParamsError(f"no kernel parameter of the graph holds {', '.join(map(repr, missing))}")

    @staticmethod
    def _inspect(d: _Driver, node: int, by_value: Mapping[int, AddressKey]) -> _NodePatch | None:
        p = _KernelNodeParams()
        d.check(d.get_params(ctypes.c_void_p(node), ctypes.byref(p)), "cuGraphKernelNodeGetParams")
        if p.extra:
            raise GraphParamsError("a kernel node passes its parameters through `extra`, which cannot be rewritten")
        layout = _param_layout(d, p)
        buffers: list[ctypes.Array] = []
        sites: list[tuple[int, int, AddressKey]] = []
        for i, (_off, size) in enumerate(layout):
            raw = ctypes.string_at(p.kernelParams[i], size) if size else b""
            buffers.append(ctypes.create_string_buffer(raw, max(size, 1)))
            # Parameters are aligned to their own size; a pointer sits on an 8-byte boundary of its parameter.
            sites.extend((i, off, key) for off, key in find_words(raw, by_value))
        if not sites:
            return None
        argv = (ctypes.c_void_p * len(buffers))(*[ctypes.cast(b, ctypes.c_void_p) for b in buffers])
        p.kernelParams = ctypes.cast(argv, ctypes.POINTER(ctypes.c_void_p))
        return _NodePatch(node, p, buffers, argv, sites, frozenset(k for _i, _o, k in sites))

    @staticmethod
    def _inspect_copy(d: _Driver, node: int, by_value: Mapping[int, AddressKey]) -> _CopyPatch | None:
        cp = _Memcpy3D()
        d.check(d.memcpy_params(ctypes.c_void_p(node), ctypes.byref(cp)), "cuGraphMemcpyNodeGetParams")
        sites: list[tuple[str, AddressKey]] = []
        for end in ("src", "dst"):
            base = getattr(cp, f"{end}Device")
            addr = base + getattr(cp, f"{end}XInBytes")
            if addr in by_value:
                if getattr(cp, f"{end}Y") or getattr(cp, f"{end}Z"):
                    raise GraphParamsError(f"a copy addresses {by_value[addr]!r} with a 2-D or 3-D offset")
                sites.append((end, by_value[addr]))
        if not sites:
            return None
        return _CopyPatch(node, cp, sites, frozenset(k for _e, k in sites))

    def update(self, addresses: Mapping[AddressKey, int]) -> int:
        """Write the addresses that changed since the last call into the executable graph; returns how many
        nodes were rewritten. Keys not given keep their address."""
        changed = {k for k, v in addresses.items() if self.current.get(k) != v}
        if not changed:
            return 0
        d = _lib()
        rewritten = 0
        for patch in self.nodes:
            if patch.keys.isdisjoint(changed):
                continue
            for i, off, key in patch.sites:
                if key in changed:
                    ctypes.memmove(ctypes.addressof(patch.buffers[i]) + off, int(addresses[key]).to_bytes(_WORD, "little"), _WORD)
            d.check(d.set_params(self._exec, ctypes.c_void_p(patch.node), ctypes.byref(patch.params)), "cuGraphExecKernelNodeSetParams")
            rewritten += 1
        for copy in self.copies:
            if copy.keys.isdisjoint(changed):
                continue
            for end, key in copy.sites:
                if key in changed:
                    # The copy's offset into the caller's tensor is kept: its address is that of the first byte moved.
                    setattr(copy.params, f"{end}Device", int(addresses[key]) - getattr(copy.params, f"{end}XInBytes"))
            d.check(
                d.set_memcpy(self._exec, ctypes.c_void_p(copy.node), ctypes.byref(copy.params), self._ctx),
                "cuGraphExecMemcpyNodeSetParams",
            )
            rewritten += 1
        for k in changed:
            self.current[k] = addresses[k]
        return rewritten
