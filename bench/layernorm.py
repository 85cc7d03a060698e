#!/usr/bin/env python3
"""Layer norm forward and backward on the GPU: flashjit against torch.nn.functional.layer_norm.

flashjit is called through its Python package (flashjit.layer_norm, python/ of this repository
on the library --lib names); the peer is torch.nn.functional.layer_norm (PyTorch's fused CUDA
kernels). Backwards are timed alone, as torch.autograd.grad of one forward's output for both.
Both run on the same random [rows, cols] inputs and are timed the same way as
bench/attention.py: CUDA events around each call, warm-up runs first, the median of repeated
runs, a 256 MB buffer written before each run so that L2 holds none of the inputs, and a short
GPU spin that the host's call overhead overlaps.

Before timing, each result is checked against a float64 layer norm computed by PyTorch on the
same inputs: y, dx, dgamma and dbeta must be within twice the error of torch's own result in
the input dtype (and never NaN). Bandwidth is reported in GB/s over the bytes a layer norm must
move: forward reads x, gamma, beta and writes y (and 8 bytes of statistics per row); backward
reads x, dy, gamma and the statistics and writes dx, dgamma, dbeta.

Writes a markdown table to --out and the log to standard output. `--list-shapes` prints the
shapes and needs neither PyTorch nor a GPU. Not run in CI: it needs a GPU.
"""

import argparse
import sys
from typing import List, Sequence

from attention import FLUSH_BYTES, default_library, describe_commit, describe_gpu
from op_timing import TIMING_METHOD, open_flashjit, rel_l2, time_ms

# 1536 and 2048 columns: rows that fill three quarters and all of the 2048 bucket's threads.
SHAPES = [(rows, cols) for rows in (4096, 32768)
          for cols in (768, 1024, 1536, 2048, 4096, 8192, 16384)]
SHAPES += [(1024, 65536)]


def measure(torch, fj, rows: int, cols: int, dtype: str, args) -> List[str]:
    F = torch.nn.functional
    tdtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    x, dy = (torch.randn(rows, cols, dtype=tdtype, device="cuda", generator=gen) for _ in range(2))
    gamma = (1 + 0.5 * torch.randn(cols, device="cuda", generator=gen)).to(tdtype)
    beta = (0.5 * torch.randn(cols, device="cuda", generator=gen)).to(tdtype)
    # flashjit's backward alone: autograd of one forward's output, as torch's below.
    xf, gf, bf = (t.clone().requires_grad_() for t in (x, gamma, beta))
    yf = fj.layer_norm(xf, gf, bf, args.eps)

    weights = (gamma.detach(), beta.detach())  # no autograd: torch's forward is timed without

    def flashjit_forward():
        return fj.layer_norm(x, *weights, args.eps)

    def flashjit_backward():
        return torch.autograd.grad(yf, (xf, gf, bf), dy, retain_graph=True)

    # Check: float64 reference and torch's own error in the input dtype.
    x64, g64, b64 = (t.double().requires_grad_() for t in (x, gamma, beta))
    y64 = F.layer_norm(x64, (cols,), g64, b64, args.eps)
    dx64, dg64, db64 = torch.autograd.grad(y64, (x64, g64, b64), dy.double())
    xt, gt, bt = (t.clone().requires_grad_() for t in (x, gamma, beta))
    yt = F.layer_norm(xt, (cols,), gt, bt, args.eps)
    dxt, dgt, dbt = torch.autograd.grad(yt, (xt, gt, bt), dy)
    y = flashjit_forward()
    dx, dgamma, dbeta = flashjit_backward()
    torch.cuda.synchronize()
    verdicts = []
    for name, ours, torchs, exact in (("y", y, yt, y64), ("dx", dx, dxt, dx64),
                                      ("dgamma", dgamma, dgt, dg64), ("dbeta", dbeta, dbt, db64)):
        error, bound = rel_l2(ours, exact), 2 * max(rel_l2(torchs, exact), 1e-7)
        if not (error <= bound):
            verdicts.append(f"{name} {error:.2e} > {bound:.2e}")
    element = x.element_size()
    fwd_bytes = 2 * rows * cols * element + 2 * cols * element + 8 * rows
    bwd_bytes = 3 * rows * cols * element + 3 * cols * element + 8 * rows
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    torch_fwd = time_ms(torch, flush, lambda: F.layer_norm(x, (cols,), gamma, beta, args.eps),
                        args.warmup, args.runs)
    xr = x.clone().requires_grad_()
    yr = F.layer_norm(xr, (cols,), gamma.requires_grad_(), beta.requires_grad_(), args.eps)
    torch_bwd = time_ms(torch, flush,
                        lambda: torch.autograd.grad(yr, (xr, gamma, beta), dy, retain_graph=True),
                        args.warmup, args.runs)
    ours_fwd = time_ms(torch, flush, flashjit_forward, args.warmup, args.runs)
    ours_bwd = time_ms(torch, flush, flashjit_backward, args.warmup, args.runs)
    gbps = lambda nbytes, ms: f"{nbytes / ms / 1e6:.0f}"
    check = "ok" if not verdicts else "WRONG: " + "; ".join(verdicts)
    return [f"{rows}x{cols}", dtype, f"{ours_fwd:.3f} ({gbps(fwd_bytes, ours_fwd)})",
            f"{torch_fwd:.3f} ({gbps(fwd_bytes, torch_fwd)})",
            f"{ours_bwd:.3f} ({gbps(bwd_bytes, ours_bwd)})",
            f"{torch_bwd:.3f} ({gbps(bwd_bytes, torch_bwd)})", check]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", default=default_library(),
                   help="libflashjit.so (default: $FLASHJIT_LIB or build/release/api/)")
    p.add_argument("--dtypes", default="bf16,fp16,fp32")
    p.add_argument("--eps", type=float, default=1e-5)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="layernorm.md", help="markdown report")
    p.add_argument("--list-shapes", action="store_true", help="print the shapes and exit")
    return p.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    dtypes = args.dtypes.split(",")
    if args.list_shapes:
        for rows, cols in SHAPES:
            for dtype in dtypes:
                print(f"{rows}x{cols} {dtype}")
        return 0
    import torch  # only for a real run
    fj, problem = open_flashjit(args.lib)
    if fj is None:
        print(f"layernorm.py: {problem}", file=sys.stderr)
        return 1
    header = ["shape", "dtype", "flashjit fwd ms (GB/s)", "torch fwd ms (GB/s)",
              "flashjit bwd ms (GB/s)", "torch bwd ms (GB/s)", "check"]
    lines = [f"# layer norm: flashjit {fj.version()} vs torch {torch.__version__}", "",
             f"commit {describe_commit()}, {describe_gpu()}", "", f"Timing: {TIMING_METHOD}.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    failed = False
    for rows, cols in SHAPES:
        for dtype in dtypes:
            row = measure(torch, fj, rows, cols, dtype, args)
            failed |= row[-1] != "ok"
            print(" | ".join(row), flush=True)
            lines.append("| " + " | ".join(row) + " |")
            with open(args.out, "w") as out:
                out.write("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
