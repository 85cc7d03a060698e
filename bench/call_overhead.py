"""Where a short call's time goes: host time per call against GPU time, flashjit through its
Python package on a GPU.

The benchmarks time GPU time behind a spin of about 0.2 ms (op_timing.SPIN_CYCLES) that the
host's call overhead overlaps. A call whose host work takes longer than the spin, or waits for
the GPU inside, shows that excess as GPU time. This script says which it is, per call:

- host us: the host's time in the call (perf_counter around it, the GPU idle before, no
  synchronization after), the median of --runs;
- host us, back to back: the mean of ten calls made one after another (a decoding loop's
  steady state), the median of --runs: where it is much less than "host us", that call's time
  was a cold start after the wait;
- gpu us: the benchmarks' measure (events around the call after the 0.2 ms spin);
- gpu us, 5 ms spin: the same behind a spin 25 times as long, which hides any host work up to
  5 ms: where this is much less than "gpu us", host work, not the kernels, set that number.

Usage: python3 bench/call_overhead.py --lib build/release/api/libflashjit.so --out FILE.md
"""

import argparse
import statistics
import sys
import time
from typing import Callable, List, Tuple

import op_timing
from attention import FLUSH_BYTES, describe_commit, describe_gpu

CALLS = ("layer_norm 4096x768", "layer_norm backward 4096x768", "layer_norm 32768x4096",
         "layer_norm backward 32768x4096", "decode b1 ctx4096", "decode b8 ctx32768",
         "attention backward d128 b16 s1024")


def layer_norm_calls(torch, fj, rows: int, cols: int):
    """flashjit's layer norm forward, and its backward through autograd, as bench/layernorm.py
    times them (bf16)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    x, dy = (torch.randn(rows, cols, dtype=torch.bfloat16, device="cuda", generator=gen)
             for _ in range(2))
    gamma = (1 + 0.5 * torch.randn(cols, device="cuda", generator=gen)).to(torch.bfloat16)
    beta = (0.5 * torch.randn(cols, device="cuda", generator=gen)).to(torch.bfloat16)
    xf, gf, bf = (t.clone().requires_grad_() for t in (x, gamma, beta))
    yf = fj.layer_norm(xf, gf, bf, 1e-5)
    return (lambda: fj.layer_norm(x, gamma, beta, 1e-5),
            lambda: torch.autograd.grad(yf, (xf, gf, bf), dy, retain_graph=True))


def decode_call(torch, fj, batch: int, context: int):
    """One token a sequence over a paged bf16 cache (pages of 16, GQA 32:4, head dim 128)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(batch, 1, 32, 128, dtype=torch.bfloat16, device="cuda", generator=gen)
    pages = batch * context // 16
    k, v = (torch.randn(pages, 16, 4, 128, dtype=torch.bfloat16, device="cuda", generator=gen)
            for _ in range(2))
    table = torch.randperm(pages, device="cuda").to(torch.int32).reshape(batch, -1).contiguous()
    lengths = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    return lambda: fj.attention_with_kvcache(q, k, v, lengths, block_table=table, causal=True)


def attention_backward_call(torch, fj):
    """The attention backward at head dim 128, batch 16 x 16 heads x 1024 (bench/attention.py's
    call)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, dout = (torch.randn(16, 1024, 16, 128, dtype=torch.bfloat16, device="cuda",
                                 generator=gen) for _ in range(4))
    o, lse = fj.attention(q, k, v, return_lse=True)
    return lambda: fj.attention_backward(dout, q, k, v, o, lse)


def host_us(torch, fn: Callable[[], object], runs: int, calls: int = 1) -> float:
    """Host time per call: the mean of `calls` calls made one after another once the GPU is
    idle, the median over `runs`. One call times a call after the host waited for the GPU; ten
    time a decoding loop's steady state, which says how much of the one was a cold start."""
    samples = []
    for _ in range(runs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def gpu_us(torch, flush, fn: Callable[[], object], runs: int, spin_cycles: int) -> float:
    saved = op_timing.SPIN_CYCLES
    op_timing.SPIN_CYCLES = spin_cycles
    try:
        return 1e3 * op_timing.time_ms(torch, flush, fn, 3, runs)
    finally:
        op_timing.SPIN_CYCLES = saved


def c_call(torch, fj):
    """The C API's layer norm forward alone (4096 x 768, bf16), its arguments made once: the
    library's host time through ctypes, without the package's Python around it."""
    import ctypes  # pylint: disable=import-outside-toplevel
    from flashjit import _arrays, _capi, norms  # pylint: disable=import-outside-toplevel
    x = torch.randn(4096, 768, dtype=torch.bfloat16, device="cuda")
    gamma, beta = torch.ones(768, dtype=x.dtype, device="cuda"), torch.zeros_like(x[0])
    launch = _arrays.Launch({"x": x, "weight": gamma, "bias": beta})
    outputs = (launch.output("y", x.shape, "bf16"), launch.output("mean", (4096,), "f32"),
               launch.output("rstd", (4096,), "f32"))
    args = (launch.runtime.handle, ctypes.byref(norms._options(1e-5, False)),
            *(_capi.pointer(launch.input(n)) for n in ("x", "weight", "bias")),
            *(_capi.pointer(o) for o in outputs), launch.stream)
    del fj
    return lambda: _capi.library().flashjit_layer_norm_forward(*args)


def calls_of(torch, fj):
    ln_small = layer_norm_calls(torch, fj, 4096, 768)
    ln_large = layer_norm_calls(torch, fj, 32768, 4096)
    return dict(zip(CALLS, (*ln_small, *ln_large, decode_call(torch, fj, 1, 4096),
                            decode_call(torch, fj, 8, 32768), attention_backward_call(torch, fj))))


def measure(torch, fj, runs: int) -> List[Tuple[str, float, float, float, float]]:
    """Each call eagerly (the package's default), then through its custom operator (as
    torch.compile traces it; PyTorch 2.4 and later), and the C call alone."""
    from flashjit import _custom_ops  # pylint: disable=import-outside-toplevel
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    traced = _custom_ops._traced
    paths = [("eager", traced)] + ([("operator", lambda arrays: True)] if _custom_ops.AVAILABLE
                                   else [])
    timed = []
    for path, rule in paths:
        _custom_ops._traced = rule
        timed += [(f"{name} ({path})", fn) for name, fn in calls_of(torch, fj).items()]
    _custom_ops._traced = traced
    timed.append(("layer_norm 4096x768 (the C call alone)", c_call(torch, fj)))
    rows = []
    for name, fn in timed:
        rule = next((r for p, r in paths if f"({p})" in name), traced)
        _custom_ops._traced = rule
        fn()  # compiled and loaded before anything is timed
        rows.append((name, host_us(torch, fn, runs), host_us(torch, fn, runs, calls=10),
                     gpu_us(torch, flush, fn, runs, op_timing.SPIN_CYCLES),
                     gpu_us(torch, flush, fn, runs, 25 * op_timing.SPIN_CYCLES)))
        print(" | ".join([name] + [f"{x:.1f}" for x in rows[-1][1:]]), flush=True)
    _custom_ops._traced = traced
    return rows


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", default="build/release/api/libflashjit.so", help="libflashjit.so")
    p.add_argument("--out", required=True, help="markdown report to write")
    p.add_argument("--runs", type=int, default=30, help="timed runs of each measure")
    args = p.parse_args(argv)
    fj, problem = op_timing.open_flashjit(args.lib)
    if fj is None:
        print(f"call_overhead.py: {problem}", file=sys.stderr)
        return 1
    import torch  # pylint: disable=import-outside-toplevel
    rows = measure(torch, fj, args.runs)
    lines = [f"# Host time and GPU time per call: {args.lib}", "",
             f"commit {describe_commit()}, {describe_gpu()}, "
             f"torch {torch.__version__}, the median of {args.runs} runs each", "",
             "| call | host us | host us, back to back | gpu us (0.2 ms spin) | "
             "gpu us (5 ms spin) |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {name} | {h:.1f} | {hb:.1f} | {g:.1f} | {g5:.1f} |"
              for name, h, hb, g, g5 in rows]
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
