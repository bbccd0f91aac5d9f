"""Shared by the one-GPU diagnostics here: the median time of a CUDA launch sequence."""
import statistics

import torch


def median_ms(fn, reps=30, warmup=3):
    """Median over `reps` of `fn()` timed with CUDA events (ms), after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
