"""One rank's GPU state, shared by both GPU modes: buffers, tables, kernels, host ops, launches.

A :class:`RankState` is built in two steps. ``RankState(m, rank, allocate)`` allocates the
rank's buffers with the mode's allocator (symmetric memory under torchrun, plain tensors when
every rank shares one GPU). ``connect(peers, grids)`` then builds what refers to other ranks
through a :class:`PeerViews` provider (flat views of a peer's buffer for the host copies, the
peer-pointer tables of the kernels), the tables, the kernels with their resolved grids and
the host ops. The modes differ only in the allocator, the peer views, the grids and how
launches of several ranks are ordered and synchronised (``_runner.session`` / ``_runner.onegpu``).
Imports torch: GPU only.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from .._manifest.fill import checked_init, draw_buffer, random_fill, replicated_seed, routing_seed
from .._manifest.types import NVSHMEM, BufferSpec, CopyOp, KernelSpec, Manifest, NumSms
from .._signals.board import epoch_target, signed32
from ..errors import ManifestError
from .memops import DriverOps

TORCH_DTYPES = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
    "fp8e4m3": torch.float8_e4m3fn,
    "int32": torch.int32,
    "uint32": torch.uint32,
    "int64": torch.int64,
}
ERR_WORDS = 8
_EPOCH_KINDS = ("epoch", "epoch-target", "epoch-word")
#: Argument kinds whose value is fixed on the host at each launch: a launch captured in a
#: CUDA graph would replay them frozen (``epoch-word`` kernels read the epoch on the device).
HOST_EPOCH_KINDS = ("epoch", "epoch-target")

Allocate = Callable[[BufferSpec, torch.dtype], torch.Tensor]

_modules: dict[Path, Any] = {}


class PeerViews(Protocol):
    """How a rank reaches the other ranks' buffers."""

    def flat(self, buffer: str, rank: int) -> torch.Tensor:
        """A flat view of ``rank``'s ``buffer`` (symmetric buffers only), usable by ``copy_``."""
        ...

    def pointers(self, buffer: str) -> list[int]:
        """Every rank's device address of ``buffer``, in rank order."""
        ...


def load_entry(k: KernelSpec, index: int) -> Any:
    """Import the kernel's source file (once per file) and return its ``@triton.jit`` entry."""
    if k.source_path is None:
        raise ManifestError(f"kernels[{index}].source", "kernel sources resolve against the manifest file; load it with load_manifest")
    path = k.source_path
    mod = _modules.get(path)
    if mod is None:
        # Emitted kernels import their shared device primitives from sibling files.
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        name = f"ovl_kernel_{len(_modules)}_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ManifestError(f"kernels[{index}].source", f"cannot import {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        _modules[path] = mod
    fn = getattr(mod, k.entry, None)
    if fn is None:
        raise ManifestError(f"kernels[{index}].entry", f"{path} defines no {k.entry!r}")
    return fn


def _param_names(fn: Any) -> list[str]:
    return list(inspect.signature(getattr(fn, "fn", fn)).parameters)


def _no_epoch_specialisation(fn: Any, names: set[str]) -> None:
    # Triton compiles a new variant when an int argument becomes 1 or a multiple of 16;
    # epoch-dependent arguments do so over the launches. Loading a module mid-run blocks
    # behind a spinning kernel, so these arguments get a single variant.
    for p in getattr(fn, "params", []):
        if getattr(p, "name", None) in names:
            p.do_not_specialize = True
            if hasattr(p, "do_not_specialize_on_alignment"):
                p.do_not_specialize_on_alignment = True


def whole_device_grids(m: Manifest, num_sms: int) -> list[tuple[int, ...]]:
    """Every kernel's grid with ``num-sms`` dims resolved against the whole device (one rank per GPU)."""
    return [tuple(g.resolve(num_sms) if isinstance(g, NumSms) else g for g in k.grid) for k in m.kernels]


class RankState:
    """The state of one rank: allocate, connect to the peers, then launch epoch after epoch."""

    #: How kernels that call NVSHMEM are wrapped for launch, ``(fn, name) -> kernel``: None for PyTorch's
    #: ``requires_nvshmem`` (``_runner.nvshmem``); a session on directly bootstrapped NVSHMEM sets its heap's launcher
    #: (``DirectNvshmem.launcher``) before ``connect``.
    nvshmem_launcher: Callable[[Any, str], Any] | None = None

    def __init__(self, m: Manifest, rank: int, num_sms: int, allocate: Allocate) -> None:
        self.m, self.rank, self.world = m, rank, m.world
        self.num_sms = num_sms
        self.epoch = 0
        self.tensors: dict[str, torch.Tensor] = {}
        for b in m.buffers:
            t = allocate(b, TORCH_DTYPES[b.dtype])
            t.zero_()
            self.tensors[b.name] = t
        sig = self.tensors[m.signals.buffer]
        # Kernels compare signed 32-bit values; stream writes take uint32 tensors.
        self.sig_kernel = sig.view(torch.int32) if sig.dtype == torch.uint32 else sig
        self.sig_u32 = sig.view(-1).view(torch.uint32) if m.signals.bits == 32 else None
        self.err = torch.zeros(ERR_WORDS, dtype=torch.int32, device=sig.device)
        # The launch count on the device: ``epoch-word`` kernels derive their wait targets from
        # it and host-op signals copy it into the slot, so a captured launch replays correctly.
        # A warm-up passes ``zero_word`` instead (every wait is met at once).
        self.epoch_word = torch.zeros(1, dtype=torch.int32, device=sig.device)
        self.zero_word = torch.zeros(1, dtype=torch.int32, device=sig.device)
        # Host ops' copies and signals through the driver (None: through torch).
        self.driver = DriverOps.load()

    def connect(self, peers: PeerViews, grids: Sequence[tuple[int, ...]], peer_views: bool = True) -> None:
        """Tables, peer-pointer tables, kernels (with ``grids``, one per manifest kernel) and host ops.
        ``peer_views=False`` (an NVSHMEM process, which has none: ``_runner.nvshmem``): no peer's view or
        pointer is asked for; the manifest then has no host ops and no peer-pointer arguments."""
        m, rank = self.m, self.rank
        dev = self.err.device
        self.peers = peers
        self.grids = list(grids)
        self.peer_sig32 = [
            self._flat(m.signals.buffer, p).view(torch.uint32) if m.signals.bits == 32 and (peer_views or p == rank) else None
            for p in range(self.world)
        ]
        # Host-op signals are 4-byte device copies of the epoch word into the slot.
        self.peer_sig_i32 = [None if s is None else s.view(torch.int32) for s in self.peer_sig32]
        self.tables = {t.name: torch.tensor(list(t.values[rank]), dtype=TORCH_DTYPES[t.dtype], device=dev) for t in m.tables}
        self.peer_ptrs = {
            b.name: torch.tensor(peers.pointers(b.name), dtype=torch.int64, device=dev) for b in m.buffers if b.symmetric and peer_views
        }
        self.kernels = [self._prepare_kernel(k, i) for i, k in enumerate(m.kernels)]
        self.host_ops = [(s.name, self._prepare_ops(s.ops, s.name)) for s in m.streams_of(rank)]

    # ---- setup ----
    def _flat(self, name: str, rank: int) -> torch.Tensor:
        if rank == self.rank:
            return self.tensors[name].view(-1)
        if not self.m.buffer(name).symmetric:
            raise ManifestError("hostOps", f"rank {self.rank} addresses non-symmetric buffer {name!r} on rank {rank}")
        return self.peers.flat(name, rank)

    def _prepare_ops(self, ops: Any, stream: str) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for i, op in enumerate(ops):
            if isinstance(op, CopyOp):
                src = self._flat(op.src.buffer, op.src.rank)[op.src.offset : op.src.offset + op.src.length]
                dst = self._flat(op.dst.buffer, op.dst.rank)[op.dst.offset : op.dst.offset + op.dst.length]
                sig = None
                if op.signal is not None:
                    tgt = self.peer_sig_i32[op.signal.rank]
                    if tgt is None:
                        raise ManifestError(
                            "signals.bits",
                            f"rank {self.rank} stream {stream} op {i}: host-written signals need 32-bit slots",
                        )
                    sig = tgt[op.signal.slot : op.signal.slot + 1]
                out.append(("copy", dst, src, sig))
            else:
                if self.m.signals.bits != 32:
                    raise ManifestError(
                        "signals.bits",
                        f"rank {self.rank} stream {stream} op {i}: host-side waits spin on 32-bit slots; 64-bit slots are not supported on the GPU yet",
                    )
                # A wait on a peer's slot (a pull ring's forwarding step) reads it through the
                # peer view of that rank's signal buffer (``peer_sig32``).
                out.append(("wait", op.slot, op.arrivals, op.rank_of(self.rank)))
        return out

    def bind(self, buffer: str, tensor: torch.Tensor) -> None:
        """Pass ``tensor`` wherever a kernel argument names ``buffer`` (the caller's own tensor,
        from the next launch on). Only buffers no host op and no peer addresses may be bound:
        their views and addresses were fixed when the rank connected."""
        b = self.m.buffer(buffer)
        if b.symmetric or buffer == self.m.signals.buffer:
            raise ManifestError(f"buffers.{buffer}", "is symmetric (peers address it): copy into it instead of binding")
        self.tensors[buffer] = tensor
        for kd in self.kernels:
            if "cubin" in kd:  # a precompiled kernel takes the address, packed at its next launch
                kd["cubin"].rebind(buffer, int(tensor.data_ptr()))
                continue
            for name, a in kd["spec"].args:
                if a.kind == "buffer" and a.name == buffer and "static" in kd:
                    kd["static"][name] = tensor

    def advance_epoch(self) -> None:
        """The next launch: the host count and, enqueued on the current stream, the device word."""
        self.epoch += 1
        self.epoch_word.add_(1)

    def target(self, arrivals: int) -> int:
        """This epoch's wait target for ``arrivals`` (as the device compares it)."""
        value = epoch_target(self.epoch, arrivals, self.m.signals.bits)
        return signed32(value) if self.m.signals.bits == 32 else value

    def _prepare_kernel(self, k: KernelSpec, index: int) -> dict[str, Any]:
        if k.precompiled is not None:
            # A cubin compiled ahead of time (TLX): launched through the driver, not imported.
            from .precompiled import CubinLaunch

            return {"spec": k, "cubin": CubinLaunch(self, k, index, self.grids[index])}
        fn = load_entry(k, index)
        params = _param_names(fn)
        grid = self.grids[index]
        static: dict[str, Any] = {}
        dynamic: dict[str, Any] = {}
        extra: dict[str, Any] = dict(k.constexprs)
        for name, a in k.args:
            if a.kind in _EPOCH_KINDS:
                dynamic[name] = a
            elif a.kind == "num-programs":
                # A persistent body's tile stride (often a constexpr): the grid this rank launches.
                extra[name] = grid[0]
            else:
                static[name] = self._resolve(a, f"kernels[{index}] ({k.name}) argument {name}")
        for p in params:
            if p in static or p in dynamic or p in extra:
                continue
            if p in k.template_params:
                extra[p] = k.template_params[p]
            elif p == "NUM_SMS":
                extra[p] = grid[0]  # a persistent kernel strides over tiles by its grid
        missing = [p for p in params if p not in static and p not in dynamic and p not in extra and p not in ("num_warps", "num_stages")]
        if missing:
            raise ManifestError(f"kernels[{index}].args", f"{k.entry} takes {', '.join(missing)}, which neither args nor constexprs give")
        # Epoch arguments change every launch; a row count every call of an operator serving any M.
        _no_epoch_specialisation(fn, set(dynamic) | (set(self.m.rows_args) & set(static)))
        if NVSHMEM in k.requires:  # linked with NVSHMEM's device library, its module initialised by the heap in use
            launcher = self.nvshmem_launcher
            if launcher is None:
                from .nvshmem import nvshmem_launcher

                launcher = nvshmem_launcher
            fn = launcher(fn, k.name)
        return {"spec": k, "fn": fn, "grid": grid, "static": static, "dynamic": dynamic, "extra": extra}

    def _resolve(self, a: Any, where: str) -> Any:
        m = self.m
        if a.kind == "buffer":
            return self.sig_kernel if a.name == m.signals.buffer else self.tensors[a.name]
        if a.kind == "peer-pointers":
            if a.buffer not in self.peer_ptrs:
                raise ManifestError(where, f"rank {self.rank}: peer pointers of non-symmetric buffer {a.buffer!r}")
            return self.peer_ptrs[a.buffer]
        if a.kind == "table":
            return self.tables[a.name]
        if a.kind == "int":
            return a.value
        if a.kind == "rank":
            return self.rank
        if a.kind == "world":
            return self.world
        if a.kind == "timeout-ns":
            return m.wait_timeout_ns
        if a.kind == "error-buffer":
            return self.err
        raise ManifestError(where, f"unknown argument kind {a.kind!r}")

    # ---- launches ----
    def launch_kernel(self, kd: dict[str, Any], warm: bool) -> None:
        """Enqueue one kernel of this epoch on the current stream (``warm``: every wait targets 0)."""
        k: KernelSpec = kd["spec"]
        if "cubin" in kd:
            kd["cubin"].launch(warm)
            return
        args = dict(kd["static"])
        for name, a in kd["dynamic"].items():
            if a.kind == "epoch-word":
                args[name] = self.zero_word if warm else self.epoch_word
            elif a.kind == "epoch":
                # kernels wait for epoch x arrivals: epoch 0 in the warm-up never spins
                args[name] = 0 if warm else self.epoch
            else:
                args[name] = 0 if warm else self.target(a.arrivals)
        kd["fn"][kd["grid"]](**args, **kd["extra"], num_warps=k.num_warps, num_stages=k.num_stages)

    def enqueue_host_ops(self, ops: list[tuple[Any, ...]], stream: torch.cuda.Stream, warm: bool, waits: Any) -> None:
        """This epoch's copies, their signals and host waits on ``stream``.

        A signal is ordered after its data copy by the stream (the next copy starts once the
        previous one completed). Eager, copies and signals go straight to the driver
        (``_runner.memops``: a signal writes this epoch); while a stream is being captured, through
        torch, a signal being a 4-byte device copy of the epoch word into the slot, so a captured
        launch signals each replay's epoch. Once a launch was captured, always through torch: each
        replay advances the device's epoch word behind the host's back, so a later eager launch's
        literal epoch would lag the word its kernels wait for (they would wait out their bound)."""
        if torch.cuda.is_current_stream_capturing():
            self.driver = None
        if self.driver is not None:
            handle = stream.cuda_stream
            for op in ops:
                if op[0] == "copy":
                    _, dst, src, sig = op
                    self.driver.copy(handle, dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size())
                    if sig is not None:
                        self.driver.write(handle, sig.data_ptr(), self.epoch)
                else:
                    _, slot, arrivals, on = op
                    waits.enqueue(stream, slot, 0 if warm else self.target(arrivals), on)
            return
        with torch.cuda.stream(stream):
            for op in ops:
                if op[0] == "copy":
                    _, dst, src, sig = op
                    dst.copy_(src, non_blocking=True)
                    if sig is not None:
                        sig.copy_(self.epoch_word, non_blocking=True)
                else:
                    _, slot, arrivals, on = op
                    waits.enqueue(stream, slot, 0 if warm else self.target(arrivals), on)

    def device_timeout(self) -> tuple[int, int, int, int] | None:
        """``(rank, slot, seen, expected)`` a device-side wait of this rank recorded, if any (syncs)."""
        e = self.err.tolist()
        if not e[0]:
            return None
        return e[1], e[2], e[3] % (1 << 32), e[4] % (1 << 32)

    def record_host_timeout(self, rank: int, slot: int, seen: int, expected: int) -> None:
        """Record a host-side wait timeout in the error buffer, as a device wait would."""
        if int(self.err[0].item()) == 0:
            self.err.copy_(
                torch.tensor([1, rank, slot, signed32(seen), signed32(expected), 0, 0, 0], dtype=torch.int32, device=self.err.device)
            )

    def init_buffers(self, gen: torch.Generator) -> None:
        """Fresh inputs and poisoned outputs before a checked launch; signal slots are never reset."""
        m = self.m
        for b in m.buffers:
            if b.name == m.signals.buffer:
                continue
            t = self.tensors[b.name]
            init = checked_init(m, b.name, b.init)
            if init == "keep":
                continue
            if init == "routing":  # the same routing on every rank, a fresh one per checked launch
                self.routing_draws = getattr(self, "routing_draws", 0) + 1
                t.copy_(torch.from_numpy(draw_buffer(b, routing_seed(self.routing_draws))).to(t.device))
            elif init == "replicated":  # random values, the same on every rank, fresh per checked launch
                self.replicated_draws = getattr(self, "replicated_draws", 0) + 1
                same = random_fill(
                    np.zeros(tuple(t.shape), dtype=np.float32 if t.dtype.is_floating_point else np.int64),
                    replicated_seed(self.replicated_draws),
                )
                t.copy_(torch.from_numpy(same).to(device=t.device, dtype=t.dtype))
            elif init == "zeros":
                t.zero_()
            elif init == "poison":
                t.fill_(float("nan") if t.dtype.is_floating_point else torch.iinfo(t.dtype).max)
            elif t.dtype.is_floating_point:
                t.copy_(torch.randn(t.shape, generator=gen, device=t.device, dtype=torch.float32).to(t.dtype))
            else:
                t.copy_(torch.randint(0, 100, t.shape, generator=gen, device=t.device).to(t.dtype))
