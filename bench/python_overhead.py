"""The Python package's own host time per call, without a GPU: each call runs the package's
code as it does for CUDA tensors (views of the tensors as they are, outputs allocated by torch),
with the library's op functions replaced by ones that return at once, so what is timed is the
package's Python and the ctypes calls it makes around the launch.

Not the time a call takes on a GPU: there torch allocates on the device, the package reads
torch's current stream (here there is none to read) and the library launches
(bench/call_overhead.py measures all of it on a GPU). This is the part of it that changes
with the package's code, measured on any machine: compare two versions of the package by
running this script with each on PYTHONPATH in turn.

Usage: python3 bench/python_overhead.py [--runs N] [--out FILE.md]
(FLASHJIT_LIBRARY names the library where the package has none beside it.)
"""

import argparse
import ctypes
import statistics
import sys
import time
import types
from typing import Callable, Dict, List

import torch

import flashjit
from flashjit import _arrays, _capi, _runtime
from flashjit.flash_attn_interface import flash_attn_func, flash_attn_with_kvcache

# The op functions that would launch; every other function of the library runs as it is.
LAUNCHES = ("flashjit_attention_forward", "flashjit_attention_backward",
            "flashjit_layer_norm_forward", "flashjit_layer_norm_backward")


def _no_launch(library) -> types.SimpleNamespace:
    """The library's functions, those that launch returning FLASHJIT_OK at once (looked up as
    fast as the library's own: the functions are attributes)."""
    def done(*arguments):
        return _capi.FLASHJIT_OK
    return types.SimpleNamespace(**{
        name: done if name.startswith(LAUNCHES) and not name.endswith("_init")
        else getattr(library, name) for name in _capi.HEADER.functions})


class _NoDevice:  # the runtime a CUDA call would use: only its handle is read
    handle = ctypes.c_void_p(1)


def as_if_on_a_gpu() -> None:
    """Makes host tensors take the package's CUDA path: device "cuda:0", no stream lookup,
    torch.empty in host memory, no launch."""
    no_launch = _no_launch(_capi.library())
    _capi.library = lambda: no_launch
    _runtime.cuda = lambda device: _NoDevice()
    _arrays.device_of = lambda x: "cuda:0"
    _arrays.Launch.stream = property(lambda launch: None)
    empty = torch.empty
    torch.empty = lambda *arguments, device=None, **options: empty(*arguments, **options)


def calls() -> Dict[str, Callable[[], object]]:
    """Short calls whose GPU time is tens of microseconds, where host time shows."""
    q = torch.randn(8, 1, 32, 128, dtype=torch.bfloat16)
    pages = torch.empty(64, 16, 4, 128, dtype=torch.bfloat16)
    table = torch.arange(64, dtype=torch.int32).reshape(8, 8)
    lengths = torch.full((8,), 128, dtype=torch.int32)
    x = torch.randn(64, 768, dtype=torch.bfloat16)
    gamma, beta = torch.ones(768, dtype=x.dtype), torch.zeros(768, dtype=x.dtype)
    dense = torch.randn(2, 128, 8, 64, dtype=torch.bfloat16)
    xg, gamma_g, beta_g = (t.clone().requires_grad_() for t in (x, gamma, beta))
    y = flashjit.layer_norm(xg, gamma_g, beta_g, 1e-5)
    dy = torch.randn_like(x)
    return {
        "layer_norm 64x768": lambda: flashjit.layer_norm(x, gamma, beta, 1e-5),
        "layer_norm 64x768 backward (autograd)": lambda: torch.autograd.grad(
            y, (xg, gamma_g, beta_g), dy, retain_graph=True),
        "flash_attn_with_kvcache b8, pages of 16": lambda: flash_attn_with_kvcache(
            q, pages, pages, cache_seqlens=lengths, block_table=table, causal=True),
        "flash_attn_func causal (no grad)": lambda: flash_attn_func(dense, dense, dense,
                                                                    causal=True),
        "torch.empty, three (for scale)": lambda: (torch.empty(64, 768), torch.empty(64),
                                                   torch.empty(64)),
    }


def per_call_us(fn: Callable[[], object], runs: int, calls_per_run: int = 2000) -> float:
    """The median over `runs` of the mean time of `calls_per_run` back-to-back calls."""
    for _ in range(100):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls_per_run):
            fn()
        samples.append((time.perf_counter() - start) / calls_per_run * 1e6)
    return statistics.median(samples)


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7, help="runs of 2000 calls each (default 7)")
    p.add_argument("--out", help="also write the table to this Markdown file")
    args = p.parse_args(argv)
    as_if_on_a_gpu()
    lines = [f"# Python host time per call, launches stubbed: {flashjit.__file__}", "",
             f"torch {torch.__version__}, Python {sys.version.split()[0]}, the median of "
             f"{args.runs} runs of 2000 calls", "", "| call | us |", "| --- | ---: |"]
    for name, fn in calls().items():
        lines.append(f"| {name} | {per_call_us(fn, args.runs):.1f} |")
        print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
