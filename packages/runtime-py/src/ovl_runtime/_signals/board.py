"""The signal model of ovl, executable on the CPU.

A signal slot is a 32-bit (or 64-bit) counter that is never reset: the k-th launch of an
overlapped operator waits until ``value >= k * arrivals`` and notifies by adding. Counters
wrap, so "reached" is decided with serial-number arithmetic (RFC 1982), exactly as the
emitted device code compares. Every wait is bounded: a timeout names the rank, the slot,
the value seen and the value expected.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

_WIDTHS = (32, 64)


class SignalError(ValueError):
    """Bad input to the signal model (an unknown slot, a non-positive epoch...)."""


@dataclass
class SignalTimeout(RuntimeError):
    """A bounded wait gave up before its slot reached the target."""

    rank: int
    slot: int
    seen: int
    expected: int
    timeout_s: float

    def __str__(self) -> str:
        return (
            f"rank {self.rank}: wait on signal slot {self.slot} timed out after "
            f"{self.timeout_s:g}s: saw {self.seen}, expected >= {self.expected}"
        )


def _check_width(bits: int) -> None:
    if bits not in _WIDTHS:
        raise SignalError(f"signal width must be 32 or 64 bits, got {bits}")


def epoch_target(epoch: int, arrivals: int, bits: int = 32) -> int:
    """The value a wait of launch ``epoch`` (1-based) targets: ``epoch * arrivals`` mod 2**bits."""
    _check_width(bits)
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise SignalError(f"epoch must be an integer >= 1 (launches count from 1), got {epoch!r}")
    if isinstance(arrivals, bool) or not isinstance(arrivals, int) or arrivals < 1:
        raise SignalError(f"arrivals must be an integer >= 1, got {arrivals!r}")
    return (epoch * arrivals) % (1 << bits)


def reached(value: int, target: int, bits: int = 32) -> bool:
    """Whether a wrapping counter at ``value`` has reached ``target``.

    True when ``value - target`` taken mod 2**bits lies in the lower half of the range,
    so a counter that wrapped past zero still compares as ahead.
    """
    _check_width(bits)
    modulus = 1 << bits
    return ((value - target) % modulus) < (modulus >> 1)


def signed32(value: int) -> int:
    """A 32-bit counter value as the int32 the device compares with (``(v - target) < 0``)."""
    value %= 1 << 32
    return value - (1 << 32) if value >= 1 << 31 else value


class SignalBoard:
    """One rank's signal slots: counters with release-add notify and acquire wait."""

    def __init__(self, rank: int, num_slots: int, bits: int = 32) -> None:
        _check_width(bits)
        if num_slots < 1:
            raise SignalError(f"rank {rank}: a signal board needs at least one slot, got {num_slots}")
        self.rank = rank
        self.bits = bits
        self._values = [0] * num_slots
        self._cond = threading.Condition()

    @property
    def num_slots(self) -> int:
        return len(self._values)

    def _check_slot(self, slot: int) -> None:
        if not 0 <= slot < len(self._values):
            raise SignalError(f"rank {self.rank}: signal slot {slot} is out of range (0..{len(self._values) - 1})")

    def value(self, slot: int) -> int:
        self._check_slot(slot)
        with self._cond:
            return self._values[slot]

    def notify(self, slot: int, add: int = 1) -> int:
        """Release-add ``add`` to ``slot``; returns the new value."""
        self._check_slot(slot)
        if add < 1:
            raise SignalError(f"rank {self.rank}: notify must add at least 1, got {add}")
        with self._cond:
            new = (self._values[slot] + add) % (1 << self.bits)
            self._values[slot] = new
            self._cond.notify_all()
            return new

    def write(self, slot: int, value: int) -> None:
        """Release-store ``value`` into ``slot`` (a host stream write: one writer per launch)."""
        self._check_slot(slot)
        with self._cond:
            self._values[slot] = value % (1 << self.bits)
            self._cond.notify_all()

    def wait(self, slot: int, target: int, timeout_s: float) -> int:
        """Acquire-wait until ``slot`` reaches ``target``; returns the value seen.

        Raises SignalTimeout after ``timeout_s`` seconds.
        """
        self._check_slot(slot)
        if timeout_s <= 0:
            raise SignalError(f"rank {self.rank}: a wait needs a positive timeout, got {timeout_s}")
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not reached(self._values[slot], target, self.bits):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SignalTimeout(self.rank, slot, self._values[slot], target, timeout_s)
                self._cond.wait(left)
            return self._values[slot]


class SignalWorld:
    """The signal boards of every rank, so that a rank can notify a peer's slot."""

    def __init__(self, world_size: int, num_slots: int, bits: int = 32) -> None:
        if world_size < 1:
            raise SignalError(f"world size must be >= 1, got {world_size}")
        self.boards = [SignalBoard(r, num_slots, bits) for r in range(world_size)]

    @property
    def world_size(self) -> int:
        return len(self.boards)

    def board(self, rank: int) -> SignalBoard:
        if not 0 <= rank < len(self.boards):
            raise SignalError(f"rank {rank} is outside the world of {len(self.boards)} ranks")
        return self.boards[rank]
