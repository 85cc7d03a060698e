#!/usr/bin/env python3
"""Layer norm forward and backward on the GPU: flashjit against torch.nn.functional.layer_norm.

flashjit is called through its C API (flashjit_layer_norm_forward / _backward in
include/flashjit/flashjit_c.h, libflashjit.so via ctypes, as bench/attention.py calls
attention); the peer is torch.nn.functional.layer_norm (PyTorch's fused CUDA kernels) and its
autograd backward. Both run on the same random [rows, cols] inputs and are timed the same way
as bench/attention.py: CUDA events around each call, warm-up runs first, the median of repeated
runs, and a 256 MB buffer written before each run so that L2 holds none of the inputs.

Before timing, each result is checked against a float64 layer norm computed by PyTorch on the
same inputs: y, dx, dgamma and dbeta must be within twice the error of torch's own result in
the input dtype (and never NaN). Bandwidth is reported in GB/s over the bytes a layer norm must
move: forward reads x, gamma, beta and writes y (and 8 bytes of statistics per row); backward
reads x, dy, gamma and the statistics and writes dx, dgamma, dbeta.

Writes a markdown table to --out and the log to standard output. `--list-shapes` prints the
shapes and needs neither PyTorch nor a GPU. Not run in CI: it needs a GPU.
"""

import argparse
import ctypes
import sys
from typing import List, Sequence

from attention import (FLUSH_BYTES, Flashjit, FlashjitTensor, default_library, describe_commit,
                       describe_gpu)
from op_timing import rel_l2, time_ms

SHAPES = [(rows, cols) for rows in (4096, 32768) for cols in (768, 1024, 4096, 8192, 16384)]
SHAPES += [(1024, 65536)]


class FlashjitLayerNorm(ctypes.Structure):
    """flashjit_layer_norm."""

    _fields_ = [("epsilon", ctypes.c_float), ("rms", ctypes.c_int),
                ("bias", ctypes.POINTER(FlashjitTensor)),
                ("residual", ctypes.POINTER(FlashjitTensor)),
                ("sum", ctypes.POINTER(FlashjitTensor))]


def declare_layer_norm(lib) -> None:
    """The layer norm functions' signatures on the loaded libflashjit.so."""
    ptr, tensor_p = ctypes.c_void_p, ctypes.POINTER(FlashjitTensor)
    lib.flashjit_layer_norm_init.restype = None
    lib.flashjit_layer_norm_init.argtypes = [ctypes.POINTER(FlashjitLayerNorm)]
    lib.flashjit_layer_norm_forward.restype = ctypes.c_int
    lib.flashjit_layer_norm_forward.argtypes = (
        [ptr, ctypes.POINTER(FlashjitLayerNorm)] + [tensor_p] * 6 + [ptr])
    lib.flashjit_layer_norm_backward.restype = ctypes.c_int
    lib.flashjit_layer_norm_backward.argtypes = (
        [ptr, ctypes.POINTER(FlashjitLayerNorm)] + [tensor_p] * 9 + [ptr])


def measure(torch, fj: Flashjit, rows: int, cols: int, dtype: str, args) -> List[str]:
    F = torch.nn.functional
    tdtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    x, dy = (torch.randn(rows, cols, dtype=tdtype, device="cuda", generator=gen) for _ in range(2))
    gamma = (1 + 0.5 * torch.randn(cols, device="cuda", generator=gen)).to(tdtype)
    beta = (0.5 * torch.randn(cols, device="cuda", generator=gen)).to(tdtype)
    y, dx = torch.empty_like(x), torch.empty_like(x)
    dgamma, dbeta = torch.empty_like(gamma), torch.empty_like(beta)
    mean = torch.empty(rows, dtype=torch.float32, device="cuda")
    rstd = torch.empty_like(mean)
    options = FlashjitLayerNorm()
    fj.lib.flashjit_layer_norm_init(ctypes.byref(options))
    options.epsilon = args.eps
    fx, fg, fb, fy = (Flashjit.torch_tensor(t, dtype) for t in (x, gamma, beta, y))
    fm, fr = (Flashjit.torch_tensor(t, "fp32") for t in (mean, rstd))
    fdy, fdx, fdg, fdb = (Flashjit.torch_tensor(t, dtype) for t in (dy, dx, dgamma, dbeta))

    def flashjit_forward():
        fj.check(fj.lib.flashjit_layer_norm_forward(fj.runtime, ctypes.byref(options), fx, fg, fb,
                                                    fy, fm, fr, None), "layer_norm_forward")

    def flashjit_backward():
        fj.check(fj.lib.flashjit_layer_norm_backward(fj.runtime, ctypes.byref(options), fx, fg, fm,
                                                     fr, fdy, fdx, fdg, fdb, None, None),
                 "layer_norm_backward")

    # Check: float64 reference and torch's own error in the input dtype.
    x64, g64, b64 = (t.double().requires_grad_() for t in (x, gamma, beta))
    y64 = F.layer_norm(x64, (cols,), g64, b64, args.eps)
    dx64, dg64, db64 = torch.autograd.grad(y64, (x64, g64, b64), dy.double())
    xt, gt, bt = (t.clone().requires_grad_() for t in (x, gamma, beta))
    yt = F.layer_norm(xt, (cols,), gt, bt, args.eps)
    dxt, dgt, dbt = torch.autograd.grad(yt, (xt, gt, bt), dy)
    flashjit_forward()
    flashjit_backward()
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
    fj = Flashjit(args.lib)
    declare_layer_norm(fj.lib)
    header = ["shape", "dtype", "flashjit fwd ms (GB/s)", "torch fwd ms (GB/s)",
              "flashjit bwd ms (GB/s)", "torch bwd ms (GB/s)", "check"]
    lines = [f"# layer norm: flashjit {fj.version()} vs torch {torch.__version__}", "",
             f"commit {describe_commit()}, {describe_gpu()}", "",
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
    fj.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
