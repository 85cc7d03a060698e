"""What the per-op benchmarks (layernorm.py, multiscale.py) share: timing a call with CUDA events
as bench/attention.py does (warm-up runs, then the median of repeated runs, a buffer written
before each so that L2 holds none of the inputs), and the relative L2 error of a result."""

import statistics
from typing import Callable


def time_ms(torch, flush, fn: Callable[[], object], warmup: int, runs: int) -> float:
    """The median milliseconds of `runs` calls of `fn` after `warmup` untimed ones, `flush`
    (a large tensor) zeroed before each."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples)


def rel_l2(actual, expected) -> float:
    """||actual - expected||_2 / ||expected||_2 in float64."""
    diff = (actual.double() - expected).norm().item()
    return diff / max(expected.norm().item(), 1e-300)
