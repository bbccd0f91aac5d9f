"""One rank's GPU state for a manifest: buffers, signal slots, tables, kernels, launches.

Built after ``torch.distributed`` is up (one process per GPU, under torchrun). Symmetric
buffers come from ``torch.distributed._symmetric_memory``; host ops become copy-engine
copies on side streams plus ``stream_write_value32`` signals; ``wait`` host ops become
stream memory waits (``gpu_streamwait``), bounded from the host. A launch enqueues the comm kernels, then the compute kernels, then
the host ops (their Python overhead must not delay the GEMM), then joins the side streams.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch._C._distributed_c10d import _SymmetricMemory

from .errors import ManifestError, UsageError, WaitTimeout
from .manifest import CopyOp, KernelSpec, Manifest, NumSms, checked_init
from .signals import epoch_target, signed32

TORCH_DTYPES = {
    "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
    "int32": torch.int32, "uint32": torch.uint32, "int64": torch.int64,
}
ERR_WORDS = 8
_EPOCH_KINDS = ("epoch", "epoch-target")


_modules: dict[Path, Any] = {}


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


class GpuSession:
    """The state of one rank: allocate once, then launch epoch after epoch."""

    def __init__(self, m: Manifest, rank: int, num_sms: int) -> None:
        self.m, self.rank, self.world = m, rank, m.world
        self.num_sms = num_sms
        self.epoch = 0
        group = dist.group.WORLD
        self.tensors: dict[str, torch.Tensor] = {}
        self.handles: dict[str, Any] = {}
        for b in m.buffers:
            dt = TORCH_DTYPES[b.dtype]
            if b.symmetric:
                t = symm_mem.empty(*b.shape, dtype=dt, device="cuda")
                self.handles[b.name] = symm_mem.rendezvous(t, group)
            else:
                t = torch.empty(*b.shape, dtype=dt, device="cuda")
            t.zero_()
            self.tensors[b.name] = t
        sig = self.tensors[m.signals.buffer]
        # Kernels compare signed 32-bit values; stream writes take uint32 tensors.
        self.sig_kernel = sig.view(torch.int32) if sig.dtype == torch.uint32 else sig
        self.peer_sig32 = [self._flat(m.signals.buffer, p).view(torch.uint32) if m.signals.bits == 32 else None for p in range(self.world)]
        self.err = torch.zeros(ERR_WORDS, dtype=torch.int32, device="cuda")
        self.tables = {t.name: torch.tensor(list(t.values[rank]), dtype=TORCH_DTYPES[t.dtype], device="cuda") for t in m.tables}
        self.peer_ptrs = {name: torch.tensor(list(h.buffer_ptrs), dtype=torch.int64, device="cuda") for name, h in self.handles.items()}
        self.kernels = [self._prepare_kernel(k, i) for i, k in enumerate(m.kernels)]
        self.host_streams = [(s.name, torch.cuda.Stream(), self._prepare_ops(s.ops)) for s in m.streams_of(rank)]
        self.comm_kernel_stream = torch.cuda.Stream()
        self.stream_waits = None
        if any(op[0] == "wait" for _n, _s, ops in self.host_streams for op in ops):
            from .gpu_streamwait import StreamWaits

            self.stream_waits = StreamWaits(sig.view(torch.uint32), rank)
        torch.cuda.synchronize()
        dist.barrier()

    # ---- setup ----
    def _flat(self, name: str, rank: int) -> torch.Tensor:
        t = self.tensors[name]
        if rank == self.rank:
            return t.view(-1)
        h = self.handles.get(name)
        if h is None:
            raise ManifestError("hostOps", f"rank {self.rank} addresses non-symmetric buffer {name!r} on rank {rank}")
        return h.get_buffer(rank, [t.numel()], t.dtype, 0)

    def _prepare_ops(self, ops: Any) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for op in ops:
            if isinstance(op, CopyOp):
                src = self._flat(op.src.buffer, op.src.rank)[op.src.offset:op.src.offset + op.src.length]
                dst = self._flat(op.dst.buffer, op.dst.rank)[op.dst.offset:op.dst.offset + op.dst.length]
                sig = None
                if op.signal is not None:
                    tgt = self.peer_sig32[op.signal.rank]
                    if tgt is None:
                        raise ManifestError("signals.bits", "host-written signals need 32-bit slots (stream_write_value32)")
                    sig = (tgt, op.signal.slot)
                out.append(("copy", dst, src, sig))
            else:
                if self.m.signals.bits != 32:
                    raise ManifestError("signals.bits", "host-side waits spin on 32-bit slots; 64-bit slots are not supported on the GPU yet")
                out.append(("wait", op.slot, op.arrivals))
        return out

    def _target(self, arrivals: int) -> int:
        value = epoch_target(self.epoch, arrivals, self.m.signals.bits)
        return signed32(value) if self.m.signals.bits == 32 else value

    def _prepare_kernel(self, k: KernelSpec, index: int) -> dict[str, Any]:
        if k.precompiled is not None:
            # A cubin compiled ahead of time (TLX): launched through the driver, not imported.
            from .gpu_cubin import CubinLaunch

            return {"spec": k, "cubin": CubinLaunch(self, k, index)}
        fn = load_entry(k, index)
        params = _param_names(fn)
        grid = tuple(g.resolve(self.num_sms) if isinstance(g, NumSms) else g for g in k.grid)
        static: dict[str, Any] = {}
        dynamic: dict[str, Any] = {}
        for name, a in k.args:
            if a.kind in _EPOCH_KINDS:
                dynamic[name] = a
            else:
                static[name] = self._resolve(a)
        extra: dict[str, Any] = dict(k.constexprs)
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
        _no_epoch_specialisation(fn, set(dynamic))
        return {"spec": k, "fn": fn, "grid": grid, "static": static, "dynamic": dynamic, "extra": extra}

    def _resolve(self, a: Any) -> Any:
        m = self.m
        if a.kind == "buffer":
            return self.sig_kernel if a.name == m.signals.buffer else self.tensors[a.name]
        if a.kind == "peer-pointers":
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
        raise ManifestError("kernels.args", f"unknown argument kind {a.kind!r}")

    # ---- launches ----
    def _launch_kernel(self, kd: dict[str, Any], warm: bool) -> None:
        k: KernelSpec = kd["spec"]
        if "cubin" in kd:
            kd["cubin"].launch(warm)
            return
        args = dict(kd["static"])
        for name, a in kd["dynamic"].items():
            if a.kind == "epoch":
                # kernels wait for epoch x arrivals: epoch 0 in the warm-up never spins
                args[name] = 0 if warm else self.epoch
            else:
                args[name] = 0 if warm else self._target(a.arrivals)
        kd["fn"][kd["grid"]](**args, **kd["extra"], num_warps=k.num_warps, num_stages=k.num_stages)

    def launch(self, warm: bool = False) -> None:
        """Enqueue the next epoch. ``warm``: every wait targets 0 (compile and load, never spin),
        except in kernels that send on every launch (``cubin_launch.launch_epoch``)."""
        self.epoch += 1
        main = torch.cuda.current_stream()
        start = torch.cuda.Event()
        start.record(main)
        # Communication kernels (a few programs) go first so that they hold their SMs before
        # a persistent GEMM takes every SM and spins on data only they would move.
        comm = [kd for kd in self.kernels if kd["spec"].stream == "comm"]
        if comm:
            self.comm_kernel_stream.wait_event(start)
            with torch.cuda.stream(self.comm_kernel_stream):
                for kd in comm:
                    self._launch_kernel(kd, warm)
        # Compute kernels before the host ops: the Python cost of many copy calls must not
        # delay the GEMM.
        for kd in self.kernels:
            if kd["spec"].stream == "compute":
                self._launch_kernel(kd, warm)
        value = self.epoch % (1 << 32)
        for _name, st, ops in self.host_streams:
            st.wait_event(start)
            with torch.cuda.stream(st):
                for op in ops:
                    if op[0] == "copy":
                        _, dst, src, sig = op
                        dst.copy_(src, non_blocking=True)
                        if sig is not None:
                            _SymmetricMemory.stream_write_value32(sig[0], sig[1], value)
                    else:
                        _, slot, arrivals = op
                        target = 0 if warm else self._target(arrivals)
                        assert self.stream_waits is not None
                        self.stream_waits.enqueue(st, slot, target)
        for _name, st, _ops in self.host_streams:
            main.wait_stream(st)
        if comm:
            main.wait_stream(self.comm_kernel_stream)

    def sync(self) -> None:
        """Synchronize this device, bounded: a host-side wait never filled is released and recorded."""
        if self.stream_waits is None:
            torch.cuda.synchronize()
            return
        self.stream_waits.sync(self.m.wait_timeout_ns / 1e9 + 2.0)
        if self.stream_waits.timeouts and int(self.err[0].item()) == 0:
            rank, slot, seen, expected = self.stream_waits.timeouts[0]
            self.err.copy_(torch.tensor([1, rank, slot, signed32(seen), signed32(expected), 0, 0, 0], dtype=torch.int32, device="cuda"))

    def raise_wait_errors(self) -> None:
        """After a sync: if any rank's waits timed out, raise the same WaitTimeout on every rank."""
        flag = torch.tensor([int(self.err[0].item() != 0)], device="cuda")
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if not flag.item():
            return
        every = torch.empty(self.world * ERR_WORDS, dtype=torch.int32, device="cuda")
        dist.all_gather_into_tensor(every, self.err)
        rows = every.view(self.world, ERR_WORDS).tolist()
        for r, e in enumerate(rows):
            if e[0]:
                raise WaitTimeout(e[1], e[2], e[3] % (1 << 32), e[4] % (1 << 32), f"a device-side wait (reported by rank {r}, epoch {self.epoch})")

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
            if init == "zeros":
                t.zero_()
            elif init == "poison":
                t.fill_(float("nan") if t.dtype.is_floating_point else torch.iinfo(t.dtype).max)
            elif t.dtype.is_floating_point:
                t.copy_(torch.randn(t.shape, generator=gen, device="cuda", dtype=torch.float32).to(t.dtype))
            else:
                t.copy_(torch.randint(0, 100, t.shape, generator=gen, device="cuda").to(t.dtype))
        torch.cuda.synchronize()
        dist.barrier()  # no peer may push into a buffer this rank is still filling


def check_world(m: Manifest) -> None:
    if dist.get_world_size() != m.world:
        raise UsageError(f"the manifest is for {m.world} ranks, but {dist.get_world_size()} processes run: use torchrun --nproc_per_node={m.world}")
