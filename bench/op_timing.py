"""What the benchmarks share: the flashjit package loaded from this repository on a given
library, timing a call with CUDA events (warm-up runs, then the median of repeated runs, a
buffer written before each so that L2 holds none of the inputs, and a short GPU spin so that the
host's call overhead is not timed), and the relative L2 error of a result."""

import os
import statistics
import sys
from typing import Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# About 0.2 ms at Hopper's clocks: longer than any implementation's host work per call (Python
# wrappers and PyTorch's dispatch included), so the call is queued before the start event runs.
SPIN_CYCLES = 400_000
TIMING_METHOD = ("CUDA events around each call, after a 256 MB buffer is written (L2 flushed) and "
                 "a GPU spin of about 0.2 ms that the host's call overhead overlaps (GPU time "
                 "only, for every implementation)")


def open_flashjit(library: str):
    """The flashjit package in this repository's python/, on the library at `library` (a
    build's api/libflashjit.so): (the module, "") or (None, why not)."""
    if not os.path.exists(library):
        return None, f"no libflashjit.so at {library} (build the flashjit_shared target)"
    os.environ["FLASHJIT_LIBRARY"] = os.path.abspath(library)
    sys.path.insert(0, os.path.join(REPO, "python"))
    try:
        import flashjit  # pylint: disable=import-outside-toplevel
        flashjit.version()  # loads the library
    except (ImportError, OSError, RuntimeError) as e:
        return None, f"cannot load flashjit: {e}"
    return flashjit, ""


def spin(torch) -> None:
    """Keeps the GPU busy for SPIN_CYCLES while the host prepares the next call."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(SPIN_CYCLES)  # pylint: disable=protected-access


def timed_call(torch, flush, fn: Callable[[], object]):
    """One call of `fn` as every benchmark times it: `flush` (a large tensor) zeroed, the GPU
    spin, then `fn` between two CUDA events, which are returned (read them after a
    synchronize)."""
    flush.zero_()
    spin(torch)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    return start, stop


def time_ms(torch, flush, fn: Callable[[], object], warmup: int, runs: int) -> float:
    """The median milliseconds of `runs` calls of `fn` (timed_call) after `warmup` untimed
    ones."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start, stop = timed_call(torch, flush, fn)
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples)


def rel_l2(actual, expected) -> float:
    """||actual - expected||_2 / ||expected||_2 in float64."""
    diff = (actual.double() - expected).norm().item()
    return diff / max(expected.norm().item(), 1e-300)
