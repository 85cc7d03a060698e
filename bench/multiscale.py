#!/usr/bin/env python3
"""Multi-scale attention (retention) forward and backward on the GPU: flashjit against PyTorch.

flashjit is called through its Python package (flashjit.multiscale_attention, python/ of this
repository on the library --lib names); its backward is timed alone, as torch.autograd.grad of
one forward's output, as the peer's is. The peer is the retention formula written in PyTorch the way model code writes it
(RetNet's parallel form): S = scale * (Q K^T) * M with the L x L decay mask materialized,
O = (S V) / clamp(rowsum(|S|), min=1), and its autograd backward. Both run on the same random
inputs and are timed as bench/attention.py times them: CUDA events around each call, warm-up
runs first, the median of repeated runs, a 256 MB buffer written before each run and a short GPU
spin that the host's call overhead overlaps.

Before timing, each result is checked against the same formula in float64: O, dQ, dK and dV
must be within twice the error of PyTorch's own result in the input dtype. Throughput is in
TFLOP/s over 4 * batch * heads * L^2 * d / 2 (the causal half; the backward 2.5 times that).

Writes a markdown table to --out and the log to standard output. `--list-shapes` prints the
shapes and needs neither PyTorch nor a GPU. Not run in CI: it needs a GPU.
"""

import argparse
import math
import sys
from typing import List, Sequence

from attention import FLUSH_BYTES, default_library, describe_commit, describe_gpu
from op_timing import TIMING_METHOD, open_flashjit, rel_l2, time_ms

# (batch, heads, seqlen, head_dim): batch * seqlen = 16k tokens, as bench/attention.py.
SHAPES = [(16384 // seqlen, heads, seqlen, head_dim)
          for head_dim, heads in ((64, 16), (128, 8), (256, 4))
          for seqlen in (512, 1024, 2048, 4096)]


def decay_mask(torch, gammas, seqlen: int, dtype):
    """M[h, n, m] = gamma_h^(n - m) for m <= n, else 0 ([heads, L, L])."""
    n = torch.arange(seqlen, device="cuda")
    distance = (n[:, None] - n[None, :]).to(torch.float64)
    mask = gammas.double()[:, None, None] ** distance.clamp(min=0)
    return torch.where(distance >= 0, mask, torch.zeros_like(mask)).to(dtype)


def retention(torch, q, k, v, mask, scale):
    """The formula on [batch, heads, L, d] tensors."""
    s = scale * (q @ k.transpose(-1, -2)) * mask
    return (s @ v) / s.abs().sum(-1, keepdim=True).clamp(min=1)


def measure(torch, fj, shape, dtype: str, args) -> List[str]:
    batch, heads, seqlen, head_dim = shape
    tdtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    q, k, v, dout = (torch.randn(batch, seqlen, heads, head_dim, dtype=tdtype, device="cuda",
                                 generator=gen) for _ in range(4))
    gammas = (1 - 2.0 ** (-5 - torch.arange(heads, device="cuda") % 8)).float()
    scale = 1 / math.sqrt(head_dim)
    # flashjit's backward alone: autograd of one forward's output, as the formula's below.
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o_f = fj.multiscale_attention(*leaves, decay=gammas, scale=scale)

    def flashjit_forward():
        return fj.multiscale_attention(q, k, v, decay=gammas, scale=scale)

    def flashjit_backward():
        return torch.autograd.grad(o_f, leaves, dout, retain_graph=True)

    # [batch, L, heads, d] -> [batch, heads, L, d] for the PyTorch formula.
    bhld = lambda t: t.transpose(1, 2)
    mask64 = decay_mask(torch, gammas, seqlen, torch.float64)
    inputs64 = [bhld(t).double().requires_grad_() for t in (q, k, v)]
    o64 = retention(torch, *inputs64, mask64, scale)
    grads64 = torch.autograd.grad(o64, inputs64, bhld(dout).double())
    mask_t = decay_mask(torch, gammas, seqlen, tdtype)
    inputs_t = [bhld(t).clone().requires_grad_() for t in (q, k, v)]
    o_t = retention(torch, *inputs_t, mask_t, scale)
    grads_t = torch.autograd.grad(o_t, inputs_t, bhld(dout), retain_graph=True)
    o = flashjit_forward()
    dq, dk, dv = flashjit_backward()
    torch.cuda.synchronize()
    verdicts = []
    for name, ours, theirs, exact in (("O", bhld(o), o_t, o64),
                                      ("dQ", bhld(dq), grads_t[0], grads64[0]),
                                      ("dK", bhld(dk), grads_t[1], grads64[1]),
                                      ("dV", bhld(dv), grads_t[2], grads64[2])):
        error, bound = rel_l2(ours, exact), 2 * max(rel_l2(theirs, exact), 1e-7)
        if not error <= bound:
            verdicts.append(f"{name} {error:.2e} > {bound:.2e}")
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    torch_fwd = time_ms(torch, flush, lambda: retention(torch, *inputs_t, mask_t, scale),
                        args.warmup, args.runs)
    torch_bwd = time_ms(torch, flush,
                        lambda: torch.autograd.grad(o_t, inputs_t, bhld(dout), retain_graph=True),
                        args.warmup, args.runs)
    ours_fwd = time_ms(torch, flush, flashjit_forward, args.warmup, args.runs)
    ours_bwd = time_ms(torch, flush, flashjit_backward, args.warmup, args.runs)
    flops = 4 * batch * heads * seqlen * seqlen * head_dim / 2
    tflops = lambda work, ms: f"{work / ms / 1e9:.1f}"
    check = "ok" if not verdicts else "WRONG: " + "; ".join(verdicts)
    return [f"{batch}x{heads}x{seqlen}x{head_dim}", dtype,
            f"{ours_fwd:.3f} ({tflops(flops, ours_fwd)})",
            f"{torch_fwd:.3f} ({tflops(flops, torch_fwd)})",
            f"{ours_bwd:.3f} ({tflops(2.5 * flops, ours_bwd)})",
            f"{torch_bwd:.3f} ({tflops(2.5 * flops, torch_bwd)})", check]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", default=default_library(),
                   help="libflashjit.so (default: $FLASHJIT_LIB or build/release/api/)")
    p.add_argument("--dtypes", default="bf16,fp16")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="multiscale.md", help="markdown report")
    p.add_argument("--list-shapes", action="store_true", help="print the shapes and exit")
    return p.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    dtypes = args.dtypes.split(",")
    if args.list_shapes:
        for shape in SHAPES:
            for dtype in dtypes:
                print("x".join(map(str, shape)), dtype)
        return 0
    import torch  # only for a real run
    fj, problem = open_flashjit(args.lib)
    if fj is None:
        print(f"multiscale.py: {problem}", file=sys.stderr)
        return 1
    header = ["batch x heads x L x d", "dtype", "flashjit fwd ms (TFLOP/s)",
              "torch fwd ms (TFLOP/s)", "flashjit bwd ms (TFLOP/s)", "torch bwd ms (TFLOP/s)",
              "check"]
    lines = [f"# multi-scale attention (decay mask): flashjit {fj.version()} vs torch "
             f"{torch.__version__}", "", f"commit {describe_commit()}, {describe_gpu()}", "",
             f"Timing: {TIMING_METHOD}.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    failed = False
    for shape in SHAPES:
        for dtype in dtypes:
            row = measure(torch, fj, shape, dtype, args)
            failed |= row[-1] != "ok"
            print(" | ".join(row), flush=True)
            lines.append("| " + " | ".join(row) + " |")
            with open(args.out, "w") as out:
                out.write("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
