"""Deadlock detection for the CPU emulation: a stall is reported at once, root cause first.

Every emulated thread (a rank's kernels, a comm stream's host ops) registers while it
waits. When every live thread waits on a slot that has not reached its target, nothing
can ever fill them: the launch is stalled. Each blocked wait becomes a WaitTimeout; those
whose writers (the threads that signal that slot) are not themselves blocked come first,
as they name the copy or notify that is missing. The wait bound stays as a backstop.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .._manifest.types import CopyOp, Manifest
from .._signals.board import SignalBoard, reached
from .._signals.segments import SEGMENT_FIELDS, notified_slot, segment_rows
from ..errors import RunnerError, WaitTimeout


def kernel_thread(rank: int, stream: str) -> str:
    return f"rank{rank}/kernels/{stream}"


def host_thread(rank: int, stream: str) -> str:
    return f"rank{rank}/host/{stream}"


def slot_writers(m: Manifest) -> dict[tuple[int, int], set[str]]:
    """Which threads write each (rank, slot): host signal writes and kernels' notify tables."""
    out: dict[tuple[int, int], set[str]] = {}
    for h in m.host_ops:
        for s in h.streams:
            for op in s.ops:
                if isinstance(op, CopyOp) and op.signal is not None:
                    out.setdefault((op.signal.rank, op.signal.slot), set()).add(host_thread(h.rank, s.name))
    for k in m.kernels:
        for name, a in k.args:
            if name == "notify_ptr" and a.kind == "table":
                for r, notify in enumerate(m.table(a.name or "").values):
                    for slot in notify:
                        if slot >= 0:
                            out.setdefault((r, slot), set()).add(kernel_thread(r, k.stream))
            if name == "seg_ptr" and a.kind == "table" and k.template_kind in SEGMENT_FIELDS:
                count = next((x.value for n, x in k.args if n == "num_segments" and x.kind == "int"), None)
                for r, table in enumerate(m.table(a.name or "").values):
                    n = count if count is not None else len(table) // len(SEGMENT_FIELDS[k.template_kind])
                    try:
                        rows = segment_rows(k.template_kind, table, n)
                    except IndexError:
                        continue  # reported as a kernel fault when the kernel runs
                    for seg in rows:
                        target = notified_slot(k.template_kind, seg, r)
                        if target is not None:
                            out.setdefault(target, set()).add(kernel_thread(r, k.stream))
    return out


@dataclass(frozen=True)
class _Blocked:
    board: SignalBoard
    rank: int
    slot: int
    target: int
    where: str


class Stalled(RunnerError):
    """Every live thread of a launch waits on a slot nobody can fill; ``timeouts`` root first."""

    code = "wait-timeout"

    def __init__(self, timeouts: list[WaitTimeout]) -> None:
        super().__init__(str(timeouts[0]))
        self.timeouts = timeouts


class StallMonitor:
    def __init__(self, writers: dict[tuple[int, int], set[str]], threads: list[str]) -> None:
        self._lock = threading.Lock()
        self._writers = writers
        self._live = set(threads)
        self._blocked: dict[str, _Blocked] = {}

    def enter(self, thread: str, board: SignalBoard, rank: int, slot: int, target: int, where: str) -> None:
        with self._lock:
            self._blocked[thread] = _Blocked(board, rank, slot, target, where)

    def leave(self, thread: str) -> None:
        with self._lock:
            self._blocked.pop(thread, None)

    def finished(self, thread: str) -> None:
        with self._lock:
            self._live.discard(thread)
            self._blocked.pop(thread, None)

    def stalled(self) -> list[WaitTimeout] | None:
        """The blocked waits, root causes first, if the launch can make no more progress."""
        with self._lock:
            if not self._live or not self._live <= set(self._blocked):
                return None
            seen = {t: b.board.value(b.slot) for t, b in self._blocked.items()}
            if any(reached(seen[t], b.target, b.board.bits) for t, b in self._blocked.items()):
                return None
            blocked_threads = set(self._blocked)

            def downstream(b: _Blocked) -> bool:
                return bool(self._writers.get((b.board.rank, b.slot), set()) & blocked_threads)

            order = sorted(self._blocked.items(), key=lambda kv: (downstream(kv[1]), kv[1].rank, kv[1].slot))
            return [WaitTimeout(b.rank, b.slot, seen[t], b.target, f"{b.where}; the launch is stalled") for t, b in order]
