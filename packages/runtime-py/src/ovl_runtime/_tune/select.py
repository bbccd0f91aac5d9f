"""Which candidate to keep, from their measured times: the table's pick unless another measured clearly faster.
Pure Python, so the rule is tested without a GPU. Times are compared as :func:`relative` makes them: each launch
over cuBLAS's in the same sweep, so a GPU whose clocks drift during the measurement does not pick for it.

A candidate that failed (did not compile, load or compute the right result) has no time. The table's pick is what
the torch API binds without tuning; another candidate replaces it only when its median is faster by more than
``min_gain`` (1%), so run-to-run noise never swaps a configuration for one that is no better. Where the table's pick
itself has no time, the fastest candidate measured is kept.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .settings import TuneRefused


@dataclass(frozen=True)
class Choice:
    """The index of the candidate kept and, for people, why."""

    index: int
    reason: str


def median_ms(times: Sequence[float]) -> float | None:
    """The median of a candidate's launch times (ms), None where it has none."""
    return statistics.median(times) if times else None


def relative(times: Sequence[Sequence[float]], base: int = 0, part: slice = slice(None)) -> list[float | None]:
    """Each member's launch time over member ``base``'s in the same sweep (``timing.sweeps``: aligned by sweep), the
    median over the sweeps ``part`` selects: 1.0 for the base itself, 0.9 for a member that took 10% less time. None
    for a member without a time in every selected sweep (it failed). @raises ValueError when the base has none."""
    ref = list(times[base])[part]
    if not ref or any(not (math.isfinite(t) and t > 0) for t in ref):
        raise ValueError("relative: the base member has no time in some sweep")
    out: list[float | None] = []
    for ts in times:
        mine = list(ts)[part]
        ok = len(mine) == len(ref) and all(math.isfinite(t) and t > 0 for t in mine)
        out.append(statistics.median(t / r for t, r in zip(mine, ref)) if ok else None)
    return out


def choose(times: Sequence[float | None], min_gain: float, table: int = 0) -> Choice:
    """The candidate to keep, given each one's median (ms; None where it failed); ``table`` indexes the table's pick.
    @raises TuneRefused when no candidate has a time."""
    measured = [(t, i) for i, t in enumerate(times) if t is not None and math.isfinite(t) and t > 0]
    if not measured:
        raise TuneRefused("no candidate ran correctly: the table's pick stays")
    best_t, best = min(measured)
    own = times[table] if table < len(times) else None
    if own is None or not math.isfinite(own) or own <= 0:
        return Choice(best, "the table's pick did not run; the fastest of the others")
    if best == table:
        return Choice(table, "the table's pick measured fastest")
    gain = own / best_t - 1
    if gain <= min_gain:
        return Choice(table, f"the table's pick: the fastest other is only {100 * gain:.1f}% faster (the bar is {100 * min_gain:.0f}%)")
    return Choice(best, f"{100 * gain:.1f}% faster than the table's pick")
