"""CPU emulation of a manifest: ranks as threads over numpy arrays.

Every rank holds its buffers; symmetric ones are addressable by every rank (a copy names
the rank on each side). Signal slots live in a ``SignalWorld`` that is never reset, so
launch ``k`` waits for ``k × arrivals`` exactly as on the GPU. Per launch, each rank runs
its compute kernels on one thread, its comm kernels on another and each comm stream of
host ops on its own; all waits are bounded, and the first failure stops the others.
Floating buffers are float32 here whatever their dtype (bf16/fp16 are not emulated bitwise; fp8e4m3
buffers are drawn as values fp8 represents, then computed on in float32).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._manifest.fill import checked_init, draw_buffer, random_fill
from .._manifest.fp8 import round_e4m3
from .._manifest.types import CommStream, CopyOp, KernelSpec, Manifest
from .._reference.arrays import relative_error
from .._reference.on_cpu import output_view, references
from .._report.outcome import CheckRecord, RunOutcome
from .._signals.board import SignalBoard, SignalWorld, epoch_target
from ..errors import CheckFailed, KernelFault, ManifestError, RunnerError, UsageError
from ..operators.ag_moe.emulate import ALIGN_TEMPLATES
from ..operators.gemm_ar.emulate import AR_TEMPLATES
from ..operators.moe_rs.emulate import MOE_RS_TEMPLATES
from .comm import COMM_TEMPLATES
from .kernels import GEMM_TEMPLATES, Aborted, KernelContext, wait_slot
from .local import LOCAL_TEMPLATES
from .nvshmem import NVSHMEM_TEMPLATES
from .slab_sum import SLAB_SUM_TEMPLATES
from .stall import Stalled, StallMonitor, host_thread, kernel_thread, slot_writers
from .tlx import TLX_TEMPLATES

TEMPLATES = {
    **GEMM_TEMPLATES,
    **COMM_TEMPLATES,
    **NVSHMEM_TEMPLATES,
    **SLAB_SUM_TEMPLATES,
    **AR_TEMPLATES,
    **TLX_TEMPLATES,
    **LOCAL_TEMPLATES,
    **ALIGN_TEMPLATES,
    **MOE_RS_TEMPLATES,
}
_NP_DTYPES: dict[str, Any] = {
    "bf16": np.float32,
    "fp16": np.float32,
    "fp32": np.float32,
    "fp8e4m3": np.float32,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
}

ProgressFn = Callable[[dict[str, Any]], None]


@dataclass
class EmulatedWorld:
    """The memory of every rank: buffers by name, and the signal slots."""

    manifest: Manifest
    buffers: list[dict[str, np.ndarray]] = field(default_factory=list)
    signals: SignalWorld | None = None

    @classmethod
    def allocate(cls, m: Manifest) -> EmulatedWorld:
        bufs = [
            {b.name: np.zeros(b.shape, dtype=_NP_DTYPES[b.dtype]) for b in m.buffers if b.name != m.signals.buffer} for _ in range(m.world)
        ]
        return cls(m, bufs, SignalWorld(m.world, m.signals.slots, m.signals.bits))

    def flat(self, rank: int, name: str) -> np.ndarray:
        return self.buffers[rank][name].reshape(-1)

    def symmetric(self, name: str, rank: int) -> np.ndarray:
        """Rank ``rank``'s copy of symmetric buffer ``name``, flat (the NVSHMEM heap, ``_emulate.nvshmem``)."""
        if not self.manifest.buffer(name).symmetric:
            raise KernelFault(f"buffer {name!r} is not symmetric: no PE can address it")
        return self.flat(rank, name)

    def signal_board(self, rank: int) -> SignalBoard:
        """Rank ``rank``'s signal slots."""
        assert self.signals is not None
        return self.signals.board(rank)

    def init(self, rng: np.random.Generator) -> None:
        """Fill buffers per their ``init`` before a checked launch; signals are never touched."""
        for b in self.manifest.buffers:
            init = checked_init(self.manifest, b.name, b.init)
            if b.name == self.manifest.signals.buffer or init == "keep":
                continue
            if init == "routing":  # one routing of every token, the same on every rank
                routing = draw_buffer(b, rng)
                for r in range(self.manifest.world):
                    self.buffers[r][b.name][...] = routing
                continue
            if init == "replicated":  # random values, the same on every rank (drawn once per launch)
                same = random_fill(self.buffers[0][b.name], rng)
                for r in range(self.manifest.world):
                    self.buffers[r][b.name][...] = same
                continue
            for r in range(self.manifest.world):
                arr = self.buffers[r][b.name]
                floating = np.issubdtype(arr.dtype, np.floating)
                if init == "zeros":
                    arr.fill(0)
                elif init == "poison":
                    arr.fill(np.nan if floating else np.iinfo(arr.dtype).max)
                elif floating:
                    arr[...] = rng.standard_normal(arr.shape, dtype=np.float32)
                    if b.dtype == "fp8e4m3":  # held as float32, holding only values fp8 represents
                        arr[...] = round_e4m3(arr)
                else:
                    arr[...] = rng.integers(0, 100, arr.shape).astype(arr.dtype)


def _resolve_args(w: EmulatedWorld, k: KernelSpec, rank: int, epoch: int, device_target_zero: bool) -> dict[str, Any]:
    m = w.manifest
    assert w.signals is not None
    out: dict[str, Any] = {}
    for name, a in k.args:
        if a.kind == "buffer":
            out[name] = w.signals.board(rank) if a.name == m.signals.buffer else w.buffers[rank][a.name or ""]
        elif a.kind == "peer-pointers":
            out[name] = list(w.signals.boards) if a.buffer == m.signals.buffer else [w.buffers[r][a.buffer or ""] for r in range(m.world)]
        elif a.kind == "table":
            t = m.table(a.name or "")
            out[name] = np.asarray(t.values[rank], dtype=np.int64)
        elif a.kind == "int":
            out[name] = a.value
        elif a.kind == "rank":
            out[name] = rank
        elif a.kind == "world":
            out[name] = m.world
        elif a.kind in ("epoch", "epoch-word"):
            # The numpy kernels read an epoch word's value (the launch count) directly.
            out[name] = epoch
        elif a.kind == "epoch-target":
            out[name] = 0 if device_target_zero else epoch_target(epoch, a.arrivals or 1, m.signals.bits)
        elif a.kind == "timeout-ns":
            out[name] = m.wait_timeout_ns
        else:  # error-buffer: emulated waits raise instead of recording
            out[name] = None
    return out


class Emulator:
    """Runs launches of one manifest in a row on the CPU, keeping the signal slots between them."""

    def __init__(self, m: Manifest, seed: int = 0, timeout_s: float | None = None, on_progress: ProgressFn | None = None) -> None:
        for i, k in enumerate(m.kernels):
            if k.template_kind not in TEMPLATES:
                known = ", ".join(sorted(TEMPLATES))
                raise ManifestError(
                    f"kernels[{i}].template.kind", f"the CPU emulation has no template {k.template_kind!r} (it knows {known})"
                )
        self.m = m
        self.world = EmulatedWorld.allocate(m)
        self.rng = np.random.default_rng(seed)
        self.timeout_s = timeout_s if timeout_s is not None else m.wait_timeout_ns / 1e9
        self.epoch = 0
        self.writers = slot_writers(m)
        self.on_progress = on_progress or (lambda _e: None)

    def launch(self) -> list[float]:
        """One launch (the next epoch) on every rank; returns per-rank wall times in ms.

        Raises the first failure (WaitTimeout, KernelFault...) of any thread.
        """
        self.epoch += 1
        m = self.m
        abort = threading.Event()
        errors: list[tuple[float, BaseException]] = []
        done = [0.0] * m.world
        lock = threading.Lock()
        start = time.perf_counter()

        def guard(rank: int, body: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                try:
                    body()
                except Aborted:
                    pass
                except BaseException as exc:  # noqa: BLE001 - reported to the caller below
                    if not isinstance(exc, RunnerError):
                        exc = KernelFault(f"rank {rank}: {threading.current_thread().name} failed: {exc!r}")
                    with lock:
                        errors.append((time.perf_counter(), exc))
                    abort.set()
                finally:
                    with lock:
                        done[rank] = max(done[rank], time.perf_counter() - start)

            return run

        bodies: list[tuple[int, str, Callable[[str, StallMonitor], Callable[[], None]]]] = []
        for r in range(m.world):
            for stream in ("compute", "comm"):
                ks = [k for k in m.kernels if k.stream == stream]
                if ks:
                    bodies.append((r, kernel_thread(r, stream), self._kernels(ks, r, abort)))
            for s in m.streams_of(r):
                bodies.append((r, host_thread(r, s.name), self._host_stream(s, r, abort)))
        monitor = StallMonitor(self.writers, [name for _, name, _ in bodies])

        def finishing(name: str, body: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                try:
                    body()
                finally:
                    monitor.finished(name)

            return run

        threads = [threading.Thread(target=guard(r, finishing(name, make(name, monitor))), name=name) for r, name, make in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise min(errors, key=lambda e: e[0])[1]
        return [d * 1e3 for d in done]

    def _kernels(self, ks: list[KernelSpec], rank: int, abort: threading.Event) -> Callable[[str, StallMonitor], Callable[[], None]]:
        def make(thread: str, monitor: StallMonitor) -> Callable[[], None]:
            def body() -> None:
                for k in ks:
                    args = _resolve_args(self.world, k, rank, self.epoch, device_target_zero=False)
                    TEMPLATES[k.template_kind](KernelContext(k, rank, args, self.timeout_s, abort, monitor, thread, heap=self.world))

            return body

        return make

    def _host_stream(self, s: CommStream, rank: int, abort: threading.Event) -> Callable[[str, StallMonitor], Callable[[], None]]:
        w, m = self.world, self.m
        assert w.signals is not None
        signals = w.signals

        def make(thread: str, monitor: StallMonitor) -> Callable[[], None]:
            return lambda: body(thread, monitor)

        def body(thread: str, monitor: StallMonitor) -> None:
            where = f"host stream {s.name}"
            for op in s.ops:
                if abort.is_set():
                    raise Aborted()
                if isinstance(op, CopyOp):
                    src = w.flat(op.src.rank, op.src.buffer)[op.src.offset : op.src.offset + op.src.length]
                    w.flat(op.dst.rank, op.dst.buffer)[op.dst.offset : op.dst.offset + op.dst.length] = src
                    if op.signal is not None:
                        signals.board(op.signal.rank).write(op.signal.slot, self.epoch)
                else:
                    target = epoch_target(self.epoch, op.arrivals, m.signals.bits)
                    # A wait on a peer's slot (rank set) reads that rank's board.
                    on = op.rank_of(rank)
                    wait_slot(
                        signals.board(on),
                        op.slot,
                        target,
                        self.timeout_s,
                        abort,
                        on,
                        where if on == rank else f"{where} of rank {rank}",
                        monitor,
                        thread,
                    )

        return make

    def checked_launch(self, run: int) -> tuple[CheckRecord, list[float]]:
        """Fresh inputs, poisoned outputs, one launch, then the check against numpy."""
        m = self.m
        self.world.init(self.rng)
        snap = [{key: self.world.buffers[r][name].copy() for key, name in m.reference.inputs.items()} for r in range(m.world)]
        times = self.launch()
        refs = references(m, snap)
        errs = [relative_error(output_view(m, self.world.buffers[r][m.reference.output], r), refs[r]) for r in range(m.world)]
        rec = CheckRecord.of(run, self.epoch, errs, m.reference.tolerance)
        return rec, times


ENGINES = ("auto", "numpy", "interpret")


def choose_engine(m: Manifest, engine: str = "auto") -> str:
    """The emulation that runs ``m``: ``numpy`` (the templates re-implemented in numpy) or
    ``interpret`` (the kernels' own source under Triton's interpreter, ``_emulate/interpret.py``).

    ``auto`` takes the interpreter for a compiled local body (its own code, possibly a user's,
    is what needs checking) when torch and triton import, and numpy when every kernel has a
    numpy template (compiled GEMM bodies are modelled there from their tile program);
    otherwise a ManifestError says what is missing.
    """
    if engine not in ENGINES:
        raise UsageError(f"unknown emulation engine {engine!r}: use one of {', '.join(ENGINES)}")
    if engine != "auto":
        return engine
    unknown = [(i, k) for i, k in enumerate(m.kernels) if k.template_kind not in TEMPLATES]
    local = any(k.template_kind in LOCAL_TEMPLATES for k in m.kernels)
    if not unknown and not local:
        return "numpy"
    from .interpret_load import interpret_unavailable

    reason = interpret_unavailable()
    if reason is None:
        return "interpret"
    if not unknown:
        return "numpy"
    i, k = unknown[0]
    raise ManifestError(f"kernels[{i}].template.kind", f"the numpy emulation has no template {k.template_kind!r}, and {reason}")


def make_emulator(
    m: Manifest, engine: str = "auto", seed: int = 0, timeout_s: float | None = None, on_progress: ProgressFn | None = None
) -> Any:
    """An ``Emulator`` (numpy) or an ``_emulate.interpret.InterpretEmulator`` for ``m`` (``choose_engine``)."""
    chosen = choose_engine(m, engine)
    if chosen == "numpy":
        return Emulator(m, seed=seed, timeout_s=timeout_s, on_progress=on_progress)
    from .interpret import InterpretEmulator

    try:
        return InterpretEmulator(m, seed=seed, timeout_s=timeout_s, on_progress=on_progress)
    except ManifestError as exc:
        if engine != "auto":
            raise
        i, k = next((i, k) for i, k in enumerate(m.kernels) if k.template_kind not in TEMPLATES)
        raise ManifestError(
            exc.path,
            f"the numpy emulation has no template {k.template_kind!r} (kernels[{i}]), "
            f"and the interpreter emulation cannot run the manifest: {exc.detail}",
        ) from exc


def emulate(
    m: Manifest,
    epochs: int | None = None,
    seed: int = 0,
    timeout_s: float | None = None,
    on_progress: ProgressFn | None = None,
    engine: str = "auto",
) -> RunOutcome:
    """Run ``epochs`` checked launches in a row (default ``timing.checkRuns``) on the CPU.

    ``engine``: ``numpy``, ``interpret`` or ``auto`` (see ``choose_engine``). Failures do not
    raise: they end the run and are listed in the outcome (see ``RunOutcome.raise_for_failure``).
    """
    progress = on_progress or (lambda _e: None)
    chosen = choose_engine(m, engine)
    device = "cpu-interpreter" if chosen == "interpret" else "cpu-emulation"
    runs = epochs if epochs is not None else m.timing.check_runs
    emu = make_emulator(m, engine, seed=seed, timeout_s=timeout_s, on_progress=progress)
    return checked_runs(emu, runs, m.world, device, progress)


def checked_runs(emu: Any, runs: int, world: int, device: str, progress: ProgressFn) -> RunOutcome:
    """``runs`` checked launches of ``emu`` (anything with ``epoch`` and ``checked_launch(run)``: an
    emulator, or a chain of them), each reported to ``progress``; the first failure ends the run and
    is listed in the outcome."""
    outcome = RunOutcome(mode="emulate", device=device, backend="emulated", clock="wall")
    outcome.times_ms = [[] for _ in range(world)]
    for run in range(runs):
        progress({"event": "launch", "run": run, "epoch": emu.epoch + 1})
        try:
            rec, times = emu.checked_launch(run)
        except Stalled as stall:
            outcome.failures.extend(stall.timeouts)
            for timeout in stall.timeouts:
                progress({"event": "failure", **timeout.to_json()})
            break
        except RunnerError as exc:
            outcome.failures.append(exc)
            progress({"event": "failure", **exc.to_json()})
            break
        outcome.checks.append(rec)
        for r, ms in enumerate(times):
            outcome.times_ms[r].append(ms)
        progress({"event": "check", "run": run, "epoch": rec.epoch, "maxRelError": rec.max_rel_error, "ok": rec.ok})
        if not rec.ok:
            exc2 = CheckFailed(rec.describe(), rank=rec.worst_rank, run=run)
            outcome.failures.append(exc2)
            progress({"event": "failure", **exc2.to_json()})
            break
    return outcome
