"""One-GPU mode: every rank of a manifest in one process on one GPU (``run --ranks-on-one-gpu``).

For checking emitted kernels of any world on a single GPU; the times it reports are not
performance figures (the ranks share the SMs and the memory bandwidth; copies between
"ranks" are device-local). No ``torch.distributed``: each rank is a
:class:`~ovl_runtime._runner.rank.RankState` whose buffers are plain tensors on the one device;
a peer view is the other rank's tensor, a ``peer-pointers`` table the ranks' ``data_ptr()``s.
Host copies are same-device copies on per-rank comm streams (``cuMemcpyAsync``), their signals
``cuStreamWriteValue32`` of the epoch on the plain signal tensor (``_runner.memops``; through torch
while a stream is captured), host waits ``cuStreamWaitValue32`` (``_runner.streamwait``), all bounded
from the host.

Why it cannot hang (with all ranks on one GPU, spinning programs could take every SM, and a
same-device ``copy_`` is a kernel that needs one):

1. **SM budget** (``_runner.sm_budget.plan_sm_budget``, before anything is allocated): the programs
   of waiting kernels that can run at once, summed over the ranks, stay ≤ ``num_sms −
   reserve`` (reserve ≥ 1, default ``max(2, num_sms // 16)``); each rank's ``num-sms`` grids
   of waiting kernels shrink to its share, and a fixed waiting grid that does not fit is
   refused (``UsageError`` naming the kernel) — unless every wait of the world is met by host ops
   alone and the kernel only consumes: then it is *deferred*, launched after every rank's host ops
   of the launch, so it never spins (its waits and indexing are checked, its overlap is not).
   A program sits on one SM, so at least
   ``reserve`` SMs never host a spinner: the copy kernels and the non-waiting kernels (which
   run to completion) always get an SM, and every spinner can be resident at once.
2. **Enqueue order**, a second guard: per launch, every rank's host copies, signals and
   waits first, then every rank's kernels up to its stream's first waiting kernel, then the
   waiting kernels (each stream keeps the manifest's order). Work reaches the GPU's
   scheduler in that order, so the copies start before any spinner is queued; the budget
   makes the result independent of that timing, the order only makes the usual case fast.
3. **Bounded waits**: device waits give up after ``waitTimeoutNs`` and record rank, slot,
   seen and expected in the rank's error buffer; host waits are released by the host past
   the bound (``sync_bounded``). The run then raises ``WaitTimeout`` naming them, and the
   GPU stays usable for the next manifest.
4. **Own streams, own hardware queues**: a blocked stream wait (or a spinning kernel)
   holds the hardware queue its stream is mapped to, and work of another stream mapped to
   the same queue waits behind it. torch's stream pool hands out 32 streams round-robin (two
   ``torch.cuda.Stream()`` can be one stream), and the driver maps streams onto
   ``CUDA_DEVICE_MAX_CONNECTIONS`` queues (8 unless set). So every stream of this mode is
   made with ``cuStreamCreate`` (non-blocking), the process sets
   ``CUDA_DEVICE_MAX_CONNECTIONS=32`` before CUDA starts, and a world needing more streams
   than that (per rank: compute, comm if it has comm kernels, one per host-op stream; plus
   the launching stream and one rescue stream) is refused.

The warm-up launch (every wait targets 0) loads every kernel: loading a module waits for the
device's in-flight work, a stream blocked on a wait included, so no kernel may load later.
A launch starts from one event that follows every stream of the previous launch, so no
rank's copy of epoch ``k + 1`` can overwrite data a peer still reads in epoch ``k``.
"""

from __future__ import annotations

import gc
import os
import statistics
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._manifest.types import BufferSpec, Manifest
from .._report.outcome import CheckRecord, RunOutcome
from ..errors import CheckFailed, DeviceError, ManifestError, RunnerError, UsageError, WaitTimeout
from .sm_budget import SmBudget, plan_sm_budget

ProgressFn = Callable[[dict[str, Any]], None]
MAX_CONNECTIONS = 32
NOTE = (
    "all ranks share one GPU (--ranks-on-one-gpu): a correctness run; times are not performance figures "
    "(the ranks share SMs and memory bandwidth, waiting kernels run on a reduced SM budget, copies stay on one device)"
)


def hardware_queues() -> int:
    """The hardware queues streams map onto: ``CUDA_DEVICE_MAX_CONNECTIONS`` (read when CUDA
    starts; 8 unless set). Set it to :data:`MAX_CONNECTIONS` before CUDA starts (``run`` and
    ``ovl_runtime.ops`` do) so that every stream of this mode gets a queue of its own."""
    try:
        return max(1, int(os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "8")))
    except ValueError:
        return 8


class OneGpuPeers:
    """Peer views of ranks whose buffers all live in this process on one device."""

    def __init__(self, ranks: Sequence[Any]) -> None:
        self.ranks = ranks

    def flat(self, buffer: str, rank: int) -> Any:
        if not 0 <= rank < len(self.ranks):
            raise ManifestError("hostOps", f"rank {rank} is outside the world of {len(self.ranks)} (buffer {buffer!r})")
        return self.ranks[rank].tensors[buffer].view(-1)

    def pointers(self, buffer: str) -> list[int]:
        return [int(r.tensors[buffer].data_ptr()) for r in self.ranks]


def kernel_phases(streams: Sequence[str], waits: Sequence[bool]) -> tuple[list[int], list[int]]:
    """The launch order of one rank's kernels (``streams[i]``, ``waits[i]`` of kernel ``i``):
    first every kernel before its stream's first waiting kernel, then the rest, each in
    manifest order, so a stream's own order is kept."""
    first: list[int] = []
    rest: list[int] = []
    waited: set[str] = set()
    for i, (stream, w) in enumerate(zip(streams, waits)):
        if w:
            waited.add(stream)
        (rest if stream in waited else first).append(i)
    return first, rest


class DriverStreams:
    """Non-blocking streams made with ``cuStreamCreate``: each a stream of its own (never a
    pool stream shared with another), destroyed by ``close`` once the device is idle."""

    def __init__(self) -> None:
        import ctypes

        self._ct = ctypes
        self._lib = ctypes.CDLL("libcuda.so.1")
        self.handles: list[int] = []

    def new(self) -> Any:
        import torch

        h = self._ct.c_void_p()
        rc = self._lib.cuStreamCreate(self._ct.byref(h), 1)  # CU_STREAM_NON_BLOCKING
        if rc != 0:
            raise DeviceError(f"cuStreamCreate failed with CUresult {rc}")
        self.handles.append(int(h.value or 0))
        return torch.cuda.ExternalStream(int(h.value or 0))

    def close(self) -> None:
        import torch

        torch.cuda.synchronize()
        for h in self.handles:
            self._lib.cuStreamDestroy_v2(self._ct.c_void_p(h))
        self.handles.clear()


class OneGpuWorld:
    """Every rank of ``m`` on the current device, launched together epoch after epoch."""

    def __init__(self, m: Manifest, num_sms: int, reserve: int | None = None, bound: frozenset[str] = frozenset()) -> None:
        """``bound``: buffers the caller passes per launch (``RankState.bind``); they get no memory here."""
        import torch

        from .rank import RankState
        from .streamwait import StreamWaits

        self.m = m
        has_comm = any(k.stream == "comm" for k in m.kernels)
        # Every wait is met by host ops alone (copies and signals, no host waits, no comm kernels): a consumer whose
        # fixed grid does not fit the budget can run after them (sm_budget's deferred kernels).
        host_only = not has_comm and not any(op.kind == "wait" for h in m.host_ops for st in h.streams for op in st.ops)
        self.budget: SmBudget = plan_sm_budget(m.kernels, m.world, num_sms, reserve, can_defer=host_only)  # refuses before any allocation

        def allocate(b: BufferSpec, dtype: Any) -> Any:
            if b.name in bound:
                return torch.empty(0, dtype=dtype, device="cuda")
            return torch.empty(*b.shape, dtype=dtype, device="cuda")

        self.ranks = [RankState(m, r, num_sms, allocate) for r in range(m.world)]
        peers = OneGpuPeers(self.ranks)
        for s in self.ranks:
            s.connect(peers, self.budget.grids)
        needed = sum(1 + has_comm + len(s.host_ops) for s in self.ranks) + 2
        queues = hardware_queues()
        if needed > queues:
            raise UsageError(
                f"{m.name}: {m.world} ranks on one GPU need {needed} streams (compute{', comm' if has_comm else ''} and "
                f"{len(self.ranks[0].host_ops)} host-op stream(s) per rank, plus 2), beyond the {queues} hardware "
                "queues: a blocked stream could stall another's work; run fewer ranks"
            )
        self.streams = DriverStreams()
        self.kernel_streams = [{"compute": self.streams.new(), **({"comm": self.streams.new()} if has_comm else {})} for _ in self.ranks]
        self.host_streams = [[(self.streams.new(), ops) for _name, ops in s.host_ops] for s in self.ranks]
        rescue = self.streams.new()
        self.waits: list[Any] = []
        self.rank_waits: list[Any] = []
        for s in self.ranks:
            w = None
            if any(op[0] == "wait" for _n, ops in s.host_ops for op in ops):
                assert s.sig_u32 is not None  # host waits need 32-bit slots (checked in connect)
                w = StreamWaits(s.sig_u32, s.rank, rescue, peers=s.peer_sig32)
                self.waits.append(w)
            self.rank_waits.append(w)
        self.phases = kernel_phases([k.stream for k in m.kernels], self.budget.waits)
        self.deferred = frozenset(i for i, late in enumerate(self.budget.deferred) if late)
        self.start: Any = None
        self.ends: list[Any] = []
        torch.cuda.synchronize()

    @property
    def epoch(self) -> int:
        return self.ranks[0].epoch

    def launch(self, warm: bool = False, timed: bool = True) -> None:
        """Enqueue the next epoch of every rank: host ops, then non-waiting kernels, then waiting ones.

        Everything forks from the current stream and joins back into it, so a launch is
        ordered like any other work on that stream and can be captured in a CUDA graph
        (``timed=False``: plain events, which a capture accepts)."""
        import torch

        main = torch.cuda.current_stream()
        for s in self.ranks:
            s.advance_epoch()  # the device words first: every stream below starts after them
        self.start = torch.cuda.Event(enable_timing=timed)
        self.start.record(main)
        # 1. Every rank's copies, signals and host waits (they need no SM, or one reserved SM).
        hosts_done = []
        for s, host_list in zip(self.ranks, self.host_streams):
            for st, ops in host_list:
                st.wait_event(self.start)
                s.enqueue_host_ops(ops, st, warm, self.rank_waits[s.rank])
                if self.deferred:
                    done = torch.cuda.Event()
                    done.record(st)
                    hosts_done.append(done)
        # 2. and 3. Per stream, kernels before its first waiting kernel; then the rest.
        for streams in self.kernel_streams:
            for st in streams.values():
                st.wait_event(self.start)
        for phase in self.phases:
            for s, streams in zip(self.ranks, self.kernel_streams):
                for i in phase:
                    kd = s.kernels[i]
                    st = streams[kd["spec"].stream]
                    if i in self.deferred:  # after every rank's host ops: each of its waits passes at once
                        for done in hosts_done:
                            st.wait_event(done)
                    with torch.cuda.stream(st):
                        s.launch_kernel(kd, warm)
        # Each rank ends when its streams have; the next launch starts after every rank.
        self.ends = []
        for streams, hosts in zip(self.kernel_streams, self.host_streams):
            rank_main = streams["compute"]
            if "comm" in streams:
                rank_main.wait_stream(streams["comm"])
            for st, _ops in hosts:
                rank_main.wait_stream(st)
            end = torch.cuda.Event(enable_timing=timed)
            end.record(rank_main)
            self.ends.append(end)
            main.wait_stream(rank_main)

    def sync(self) -> None:
        """Wait for every rank, bounded: host waits never filled are released and recorded."""
        from .streamwait import sync_bounded

        sync_bounded(self.waits, self.m.wait_timeout_ns / 1e9 + 2.0)
        for s, w in zip(self.ranks, self.rank_waits):
            if w is not None and w.timeouts:
                s.record_host_timeout(*w.timeouts[0])
                w.timeouts.clear()

    def raise_wait_errors(self) -> None:
        """After a sync: the first rank whose waits timed out, as a WaitTimeout naming rank and slot."""
        for s in self.ranks:
            t = s.device_timeout()
            if t is not None:
                raise WaitTimeout(*t, f"a wait of the one-GPU run (epoch {self.epoch})")

    def rank_times_ms(self) -> list[float]:
        """The last launch's time per rank (start of the launch to the end of the rank's streams)."""
        return [self.start.elapsed_time(e) for e in self.ends]


def run_one_gpu_many(
    manifests: Sequence[Manifest],
    epochs: int | None = None,
    seed: int = 0,
    progress_for: Callable[[int, Manifest], ProgressFn] | None = None,
    reserve: int | None = None,
) -> Iterator[RunOutcome | RunnerError]:
    """Run every manifest in turn with all its ranks on this process's GPU (worlds may differ).

    Yields, per manifest, its outcome (a wait timeout or a failed check listed in it) or the
    ``RunnerError`` that kept it from running (an SM budget it cannot fit, a kernel that does
    not import). An exception of the GPU stack is yielded as a ``DeviceError`` and ends the run.
    """
    from .env import set_safe_env

    set_safe_env("cuda")
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", str(MAX_CONNECTIONS))  # read when CUDA starts
    import torch
    import triton

    if not torch.cuda.is_available():
        raise UsageError("--ranks-on-one-gpu needs a CUDA device, and torch sees none")
    torch.cuda.set_device(0)
    # TMA descriptors built inside kernels (tl.make_tensor_descriptor) need scratch memory.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    props = torch.cuda.get_device_properties(0)
    for i, m in enumerate(manifests):
        progress = progress_for(i, m) if progress_for is not None else (lambda _e: None)
        result: RunOutcome | RunnerError
        try:
            result = _run_one(m, props.multi_processor_count, epochs, seed, reserve, progress)
        except RunnerError as exc:
            result = exc.with_traceback(None)
        except Exception as exc:  # noqa: BLE001 - the GPU stack's own errors, reported as values
            err = DeviceError(f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc.with_traceback(None)
            yield err
            return
        yield result
        gc.collect()
        torch.cuda.empty_cache()


def _run_one(m: Manifest, num_sms: int, epochs: int | None, seed: int, reserve: int | None, progress: ProgressFn) -> RunOutcome:
    if m.requires_nvshmem:
        raise UsageError(
            f"manifest {m.name} puts through NVSHMEM, whose PEs are processes, and this mode runs every rank in one process: "
            f"run it with torchrun --nproc_per_node={m.world} -m ovl_runtime run (on one GPU: CUDA_VISIBLE_DEVICES=0, NVSHMEM then "
            "bootstrapped through nvshmem4py, pip install 'ovl-runtime[nvshmem]'), or --emulate on the CPU"
        )
    import torch
    import triton

    outcome = RunOutcome(
        mode="one-gpu", device=torch.cuda.get_device_name(), backend="none (one process, plain tensors)", clock="cuda-events"
    )
    world = OneGpuWorld(m, num_sms, reserve)
    b = world.budget
    outcome.extra = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numSms": num_sms,
        "note": NOTE,
        "smBudget": {
            "reserve": b.reserve,
            "perRank": b.per_rank,
            "grids": {k.name: list(g) for k, g in zip(m.kernels, b.grids)},
            "waiting": [k.name for k, w in zip(m.kernels, b.waits) if w],
            # Consumers whose fixed grid exceeds the budget, launched after every rank's host ops (no overlap checked).
            "deferred": [k.name for k, late in zip(m.kernels, b.deferred) if late],
            "concurrentWaitingPrograms": b.concurrent_waiting_programs([k.stream for k in m.kernels]),
        },
    }
    try:
        progress({"event": "allocated", "device": outcome.device, "backend": outcome.backend, "smBudget": outcome.extra["smBudget"]})
        try:
            _checked_and_timed(m, world, outcome, epochs, seed, progress)
        except RunnerError as exc:
            outcome.failures.append(exc.with_traceback(None))
            progress({"event": "failure", **exc.to_json()})
        return outcome
    finally:
        world.streams.close()
        del world


def _checked_and_timed(m: Manifest, w: OneGpuWorld, outcome: RunOutcome, epochs: int | None, seed: int, progress: ProgressFn) -> None:
    """Warm-up, ``epochs`` checked launches on fresh inputs (outputs poisoned), then timed launches."""
    import torch

    from .._reference.on_gpu import local_references, output_view
    from .._reference.tensors import relative_error

    w.launch(warm=True)  # waits target 0: every kernel compiles and loads while nothing can spin
    w.sync()
    w.raise_wait_errors()
    progress({"event": "warmed-up", "epoch": w.epoch})
    gens = []
    for r in range(m.world):
        g = torch.Generator(device="cuda")
        g.manual_seed(seed * 7919 + r)
        gens.append(g)
    runs = epochs if epochs is not None else m.timing.check_runs
    for run in range(runs):
        for s, g in zip(w.ranks, gens):
            s.init_buffers(g)
        torch.cuda.synchronize()
        snaps = [{key: s.tensors[name].clone() for key, name in m.reference.inputs.items()} for s in w.ranks]
        w.launch()
        w.sync()
        w.raise_wait_errors()
        refs = local_references(m, snaps)
        errs = [relative_error(output_view(m, s.tensors[m.reference.output], s.rank), ref) for s, ref in zip(w.ranks, refs)]
        rec = CheckRecord.of(run, w.epoch, errs, m.reference.tolerance)
        outcome.checks.append(rec)
        progress({"event": "check", "run": run, "epoch": rec.epoch, "maxRelError": rec.max_rel_error, "ok": rec.ok})
        del snaps, refs
        if not rec.ok:
            raise CheckFailed(rec.describe(), rank=rec.worst_rank, run=run)
    progress({"event": "timing", "warmup": m.timing.warmup, "reps": m.timing.reps, "note": NOTE})
    for _ in range(max(1, m.timing.warmup)):
        w.launch()
    w.sync()
    w.raise_wait_errors()
    times: list[list[float]] = [[] for _ in range(m.world)]
    for _ in range(m.timing.reps):
        w.launch()
        w.sync()
        w.raise_wait_errors()
        for r, t in enumerate(w.rank_times_ms()):
            times[r].append(t)
    outcome.times_ms = times
    progress({"event": "timed", "maxMedian": max(statistics.median(t) for t in times), "note": NOTE})
