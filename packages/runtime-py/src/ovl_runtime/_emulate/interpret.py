"""CPU emulation that runs the emitted ``@triton.jit`` kernels themselves, under Triton's interpreter.

The numpy engine (``_emulate/engine.py``) re-implements each kernel template; a kernel of any other
kind (a user kernel transformed by the compiler) can only be emulated by running its source.
This engine does that with ``TRITON_INTERPRET=1`` (triton 3.6, CPU torch tensors):

- **Memory.** Every rank's buffers are CPU torch tensors of the manifest's dtype, one
  allocation per rank per buffer. ``peer-pointers`` tables hold the ``data_ptr()`` of every
  rank's allocation (int64), exactly as on the GPU: the interpreter loads and stores through
  raw addresses, so a kernel reaches a peer's buffer through the table. The signal slots
  are each rank's int32 tensor (the signal buffer), never reset: launch ``k`` waits for
  ``k × arrivals``; host-written signals store ``k``.
- **Threads.** Per launch, each rank runs its compute kernels in order on one thread, its
  comm kernels on another, and each comm stream of host ops on its own (as ``_emulate/engine.py``).
  A kernel launch is ``fn[grid](**args)``; the interpreter runs its programs one after the
  other, so programs of one launch must not wait on each other (kernels waiting on other
  kernels, streams or ranks are fine). ``num-sms`` grid dimensions resolve to ``num_sms``
  (default 4): persistent kernels stride over their tiles by the grid anyway.
- **Device primitives.** The kernels import ``ovl_runtime.language``; the engine puts the
  process in interpreter mode first (``TRITON_INTERPRET=1``, ``interpreter_mode``), so it
  has the interpreter's definitions: the waits spin on volatile loads, bounded by ``timeout_ns`` of host time, and
  record a timeout ``(1, rank, slot, seen, expected)`` in the rank's error buffer. After a
  launch the runner raises those as ``WaitTimeout``. Host-side waits are bounded likewise.
  When a thread fails, every wait still spinning returns at once.
- **NVSHMEM.** Kernels of the ``nvshmem`` backend call ``ovl_runtime.nvshmem.put_signal_add``; in interpreter
  mode it puts into the emulated world installed for the launch (``_emulate.interpret_nvshmem``): the
  local symmetric address translated to the PE's copy, then a 64-bit signal add there.
- **The interpreter** is patched while emulating (``_emulate.interpret_patch``): per-thread program
  ids, ``tl`` patched once, no write-back of shared storages, bf16 dots.

Not checked here (the numpy engine checks them): table entries out of range (a wrong
address is read as it would be on the GPU, or crashes the process); the stall detection
that reports a deadlock before the wait bound.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._manifest.fill import checked_init, draw_buffer, random_fill
from .._manifest.types import CopyOp, KernelSpec, Manifest, NumSms
from .._reference.arrays import relative_error
from .._reference.on_cpu import output_view, references
from .._report.outcome import CheckRecord
from .._signals.board import epoch_target, reached, signed32
from ..errors import KernelFault, ManifestError, RunnerError, WaitTimeout
from .interpret_load import interpret_unavailable, interpreter_mode, load_interpreted_entry
from .interpret_nvshmem import InterpretedHeap, nvshmem_world
from .stall import Stalled

DEFAULT_NUM_SMS = 4
ERR_WORDS = 8
HOST_POLL_S = 200e-6
_EPOCH_KINDS = ("epoch", "epoch-target")

ProgressFn = Callable[[dict[str, Any]], None]


def _describe(exc: BaseException) -> str:
    """The innermost cause of an interpreter error (it wraps the kernel's exception in repr)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return f"{type(exc).__name__}: {exc}"


class _Abort(Exception):
    """Another thread of the launch failed; this one stops without a report of its own."""


class InterpretEmulator:
    """Launches of one manifest in a row, each kernel run from its source by Triton's interpreter.

    The same interface as ``_emulate.engine.Emulator`` (``launch``, ``checked_launch``, ``epoch``).
    """

    def __init__(
        self,
        m: Manifest,
        seed: int = 0,
        timeout_s: float | None = None,
        on_progress: ProgressFn | None = None,
        num_sms: int = DEFAULT_NUM_SMS,
    ) -> None:
        reason = interpret_unavailable()
        if reason:
            raise ManifestError("kernels", reason)
        for i, k in enumerate(m.kernels):
            if k.precompiled is not None:
                raise ManifestError(
                    f"kernels[{i}].precompiled",
                    f"kernel {k.name} is a precompiled (TLX) kernel: the Triton interpreter cannot run it; use the numpy emulation",
                )
        import torch

        self.torch = torch
        self.m = m
        self.rng = np.random.default_rng(seed)
        self.timeout_s = timeout_s if timeout_s is not None else m.wait_timeout_ns / 1e9
        self.num_sms = num_sms
        self.epoch = 0
        self.on_progress = on_progress or (lambda _e: None)
        dtypes = {
            "bf16": torch.bfloat16,
            "fp16": torch.float16,
            "fp32": torch.float32,
            "fp8e4m3": torch.float8_e4m3fn,
            "int32": torch.int32,
            "uint32": torch.int32,
            "int64": torch.int64,
        }
        self.buffers: list[dict[str, Any]] = []
        for _r in range(m.world):
            bufs = {}
            for b in m.buffers:
                # Signals (and any uint32 buffer) are int32 here: the kernels compare signed values.
                bufs[b.name] = torch.zeros(b.shape, dtype=dtypes[b.dtype])
            self.buffers.append(bufs)
        self.sig = [self.buffers[r][m.signals.buffer].view(-1) for r in range(m.world)]
        if self.sig[0].dtype != torch.int32 or m.signals.bits != 32:
            raise ManifestError("signals", "the interpreter emulation supports 32-bit signal slots in an int32/uint32 buffer")
        self.err = [torch.zeros(ERR_WORDS, dtype=torch.int32) for _ in range(m.world)]
        self.peer_ptrs = {
            b.name: torch.tensor([self.buffers[r][b.name].data_ptr() for r in range(m.world)], dtype=torch.int64)
            for b in m.buffers
            if b.symmetric
        }
        self.tables = [{t.name: torch.tensor(list(t.values[r]), dtype=dtypes[t.dtype]) for t in m.tables} for r in range(m.world)]
        # Kernels that call NVSHMEM put into the PE's copy of a symmetric buffer (``interpret_nvshmem``).
        self.heap = InterpretedHeap(m, self.buffers) if m.requires_nvshmem else None
        self.kernels = [self._prepare(k, i) for i, k in enumerate(m.kernels)]

    # ---- setup ----
    def _prepare(self, k: KernelSpec, index: int) -> dict[str, Any]:
        fn = load_interpreted_entry(k, index)
        params = list(inspect.signature(fn.fn).parameters)
        grid = tuple(g.resolve(self.num_sms) if isinstance(g, NumSms) else g for g in k.grid)
        extra: dict[str, Any] = dict(k.constexprs)
        given = {name for name, _a in k.args}
        for p in params:
            if p in given or p in extra:
                continue
            if p in k.template_params:
                extra[p] = k.template_params[p]
            elif p == "NUM_SMS":
                extra[p] = grid[0]
        missing = [p for p in params if p not in given and p not in extra]
        if missing:
            raise ManifestError(f"kernels[{index}].args", f"{k.entry} takes {', '.join(missing)}, which neither args nor constexprs give")
        unknown = [n for n in given if n not in params]
        if unknown:
            raise ManifestError(f"kernels[{index}].args", f"{k.entry} takes no argument {', '.join(sorted(unknown))}")
        return {"spec": k, "fn": fn, "grid": grid, "extra": extra}

    def _resolve(self, k: KernelSpec, rank: int) -> dict[str, Any]:
        m = self.m
        out: dict[str, Any] = {}
        for name, a in k.args:
            if a.kind == "buffer":
                out[name] = self.buffers[rank][a.name or ""]
            elif a.kind == "peer-pointers":
                out[name] = self.peer_ptrs[a.buffer or ""]
            elif a.kind == "table":
                out[name] = self.tables[rank][a.name or ""]
            elif a.kind == "int":
                out[name] = a.value
            elif a.kind == "rank":
                out[name] = rank
            elif a.kind == "world":
                out[name] = m.world
            elif a.kind == "epoch":
                out[name] = self.epoch
            elif a.kind == "epoch-word":
                out[name] = self.torch.tensor([signed32(self.epoch)], dtype=self.torch.int32)
            elif a.kind == "epoch-target":
                out[name] = signed32(epoch_target(self.epoch, a.arrivals or 1, 32))
            elif a.kind == "timeout-ns":
                out[name] = max(1, int(self.timeout_s * 1e9))
            elif a.kind == "error-buffer":
                out[name] = self.err[rank]
            elif a.kind == "num-programs":
                # A persistent body's tile stride: the launch grid it gets here.
                g = k.grid[0]
                out[name] = g.resolve(self.num_sms) if isinstance(g, NumSms) else g
            else:
                raise ManifestError(f"kernel {k.name}.args.{name}", f"unknown argument kind {a.kind!r}")
        return out

    # ---- one launch ----
    def launch(self) -> list[float]:
        """One launch (the next epoch) on every rank; returns per-rank wall times in ms.

        Raises the first failure of any thread; device-side wait timeouts (from the error
        buffers) are raised together as ``Stalled`` (one ``WaitTimeout`` each)."""
        from .interpret_patch import patched

        self.epoch += 1
        m = self.m
        lang = interpreter_mode()
        for e in self.err:
            e.zero_()
        abort = threading.Event()
        errors: list[tuple[float, BaseException]] = []
        done = [0.0] * m.world
        lock = threading.Lock()
        start = time.perf_counter()

        def guard(rank: int, name: str, body: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                try:
                    body()
                except _Abort:
                    pass
                except BaseException as exc:  # noqa: BLE001 - reported to the caller below
                    if not isinstance(exc, RunnerError):
                        exc = KernelFault(f"rank {rank}: {name} failed under the Triton interpreter: {_describe(exc)}")
                    with lock:
                        errors.append((time.perf_counter(), exc))
                    abort.set()
                    lang.set_interpreter_abort(True)
                finally:
                    with lock:
                        done[rank] = max(done[rank], time.perf_counter() - start)

            return run

        threads: list[threading.Thread] = []
        for r in range(m.world):
            for stream in ("compute", "comm"):
                ks = [kd for kd in self.kernels if kd["spec"].stream == stream]
                if ks:
                    name = f"rank{r}/kernels/{stream}"
                    threads.append(threading.Thread(target=guard(r, name, self._kernels_body(ks, r, abort)), name=name))
            for s in m.streams_of(r):
                name = f"rank{r}/host/{s.name}"
                threads.append(threading.Thread(target=guard(r, name, self._host_body(s, r, abort)), name=name))
        lang.set_interpreter_abort(False)
        with patched(), nvshmem_world(self.heap):
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        lang.set_interpreter_abort(False)
        if errors:
            raise min(errors, key=lambda e: e[0])[1]
        timeouts = []
        for r in range(m.world):
            words = self.err[r].tolist()
            if words[0]:
                timeouts.append(
                    WaitTimeout(
                        words[1],
                        words[2],
                        words[3] % (1 << 32),
                        words[4] % (1 << 32),
                        f"a device-side wait (reported by rank {r}, epoch {self.epoch})",
                    )
                )
        if timeouts:
            raise Stalled(timeouts)
        return [d * 1e3 for d in done]

    def _kernels_body(self, ks: list[dict[str, Any]], rank: int, abort: threading.Event) -> Callable[[], None]:
        def body() -> None:
            for kd in ks:
                if abort.is_set():
                    raise _Abort()
                args = self._resolve(kd["spec"], rank)
                kd["fn"][kd["grid"]](**args, **kd["extra"])

        return body

    def _host_body(self, s: Any, rank: int, abort: threading.Event) -> Callable[[], None]:
        def flat(r: int, name: str) -> Any:
            return self.buffers[r][name].view(-1)

        def body() -> None:
            for op in s.ops:
                if abort.is_set():
                    raise _Abort()
                if isinstance(op, CopyOp):
                    src = flat(op.src.rank, op.src.buffer)[op.src.offset : op.src.offset + op.src.length]
                    flat(op.dst.rank, op.dst.buffer)[op.dst.offset : op.dst.offset + op.dst.length].copy_(src)
                    if op.signal is not None:
                        self.sig[op.signal.rank][op.signal.slot] = signed32(self.epoch)
                else:
                    # A wait on a peer's slot (rank set) reads that rank's signal tensor.
                    self._host_wait(
                        op.rank_of(rank), op.slot, epoch_target(self.epoch, op.arrivals, 32), abort, f"host stream {s.name} of rank {rank}"
                    )

        return body

    def _host_wait(self, rank: int, slot: int, target: int, abort: threading.Event, where: str) -> None:
        if not 0 <= slot < self.sig[rank].numel():
            raise KernelFault(f"rank {rank}: {where} waits on signal slot {slot}, outside the {self.sig[rank].numel()} slots")
        deadline = time.monotonic() + self.timeout_s
        while True:
            seen = int(self.sig[rank][slot]) % (1 << 32)
            if reached(seen, target, 32):
                return
            if abort.is_set():
                raise _Abort()
            if time.monotonic() > deadline:
                raise WaitTimeout(rank, slot, seen, target, where)
            time.sleep(HOST_POLL_S)

    # ---- checked launches ----
    def _numpy(self, t: Any) -> np.ndarray:
        if t.dtype in (self.torch.bfloat16, self.torch.float16, self.torch.float8_e4m3fn):
            t = t.float()
        return t.numpy().copy()

    def init(self) -> None:
        """Fill buffers per their ``init`` before a checked launch; signals are never touched."""
        m, torch = self.m, self.torch
        for b in m.buffers:
            init = checked_init(m, b.name, b.init)
            if b.name == m.signals.buffer or init == "keep":
                continue
            if init == "routing":  # one routing of every token, the same on every rank
                routing = torch.from_numpy(draw_buffer(b, self.rng))
                for r in range(m.world):
                    self.buffers[r][b.name].copy_(routing)
                continue
            if init == "replicated":  # random values, the same on every rank (drawn once per launch)
                same = torch.from_numpy(random_fill(self._numpy(self.buffers[0][b.name]), self.rng))
                for r in range(m.world):
                    self.buffers[r][b.name].copy_(same.to(self.buffers[r][b.name].dtype))
                continue
            for r in range(m.world):
                t = self.buffers[r][b.name]
                if init == "zeros":
                    t.zero_()
                elif init == "poison":
                    t.fill_(float("nan") if t.dtype.is_floating_point else torch.iinfo(t.dtype).max)
                elif t.dtype.is_floating_point:
                    t.copy_(torch.from_numpy(self.rng.standard_normal(tuple(t.shape), dtype=np.float32)).to(t.dtype))
                else:
                    t.copy_(torch.from_numpy(self.rng.integers(0, 100, tuple(t.shape))).to(t.dtype))

    def checked_launch(self, run: int) -> tuple[CheckRecord, list[float]]:
        """Fresh inputs, poisoned outputs, one launch, then the check against numpy."""
        m = self.m
        self.init()
        snap = [{key: self._numpy(self.buffers[r][name]) for key, name in m.reference.inputs.items()} for r in range(m.world)]
        times = self.launch()
        refs = references(m, snap)
        errs = [relative_error(output_view(m, self._numpy(self.buffers[r][m.reference.output]), r), refs[r]) for r in range(m.world)]
        return CheckRecord.of(run, self.epoch, errs, m.reference.tolerance), times
