#!/usr/bin/env python3
"""Attention forward and backward on the GPU: flashjit against its peers, in one run.

flashjit is called through its Python package (python/ of this repository, on the library
--lib names); the peers are PyTorch's scaled_dot_product_attention with each backend it has
(flash, efficient, cuDNN, chosen with torch.nn.attention.sdpa_kernel) and FlexAttention
(torch.nn.attention.flex_attention, compiled). Every implementation runs on the same random
inputs and is timed the same way: CUDA events around each call, warm-up runs first, the median
of repeated runs, a 256 MB buffer written before each run so that L2 holds nothing of the
inputs, and a GPU spin of about 0.2 ms before the start event, which the host's work for the
call (Python's and PyTorch's dispatch, for flashjit and the peers alike) overlaps: what is
timed is GPU time. Before it is timed, each result is checked against a float32 reference computed from
the same inputs; it must be within twice the error of a plain attention computed in the input
dtype (the bar of docs/design.md). A wrong result is reported, not timed, and a peer that
cannot run a shape is reported as "n/a (reason)".

FLOPs as FlashAttention counts them: forward 4 * batch * heads * seqlen_q * seqlen_k *
head_dim, halved when causal with seqlen_q == seqlen_k; backward 2.5 times the forward.
flashjit's backward runs in both modes: the default (dQ summed with atomic adds, whose order
varies) and flashjit-deterministic (Attention::deterministic, the same bits on every run).

Writes a markdown report (the table, the commit, the GPU and driver from nvidia-smi) to --out,
rewritten after every shape so that a run cut short keeps what it measured; the log of the run
is this script's standard output. `--list-shapes` prints the shapes and needs neither PyTorch
nor a GPU.

Decoding on paged KV caches is bench/decode.py's, which uses this script's timing and report
helpers.
"""

import argparse
import dataclasses
import datetime
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from op_timing import REPO, TIMING_METHOD, open_flashjit, timed_call  # noqa: E402
PEERS = ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "flex")
# flashjit's backward in its two modes: dQ summed with atomic adds (the default, as
# FlashAttention-2/3), and deterministic (a dQ kernel of its own; backward only).
FLASHJIT = ("flashjit", "flashjit-deterministic")
IMPLEMENTATIONS = FLASHJIT + PEERS
FLUSH_BYTES = 256 << 20  # written before every timed run: larger than any GPU's L2

# ---- shapes and FLOPs (no PyTorch needed) ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Shape:
    """One measurement: an op ("forward" or "backward") on one problem size."""

    op: str
    dtype: str  # "bf16" or "fp16"
    head_dim: int
    heads: int
    batch: int
    seqlen: int  # queries and keys
    causal: bool

    def label(self) -> str:
        return (f"{self.op} {self.dtype} d{self.head_dim} b{self.batch} h{self.heads} "
                f"s{self.seqlen}{' causal' if self.causal else ''}")

    def flops(self) -> float:
        return attention_flops(self.batch, self.heads, self.seqlen, self.seqlen, self.head_dim,
                               self.causal, self.op == "backward")


def attention_flops(batch: int, heads: int, seqlen_q: int, seqlen_k: int, head_dim: int,
                    causal: bool, backward: bool) -> float:
    """FLOPs of one call as FlashAttention counts them (see the module's doc)."""
    flops = 4.0 * batch * heads * seqlen_q * seqlen_k * head_dim
    if causal and seqlen_q == seqlen_k:
        flops /= 2
    return 2.5 * flops if backward else flops


def heads_for(head_dim: int) -> int:
    """Heads per call: a model width of 2048 (32 heads of 64, 16 of 128, 8 of 256)."""
    return max(1, 2048 // head_dim)


def make_shapes(head_dims: Sequence[int], seqlens: Sequence[int], dtypes: Sequence[str],
                ops: Sequence[str], causals: Sequence[bool], total_tokens: int) -> List[Shape]:
    """Every combination, batch = total_tokens / seqlen, in the order they are measured: by
    dtype, op, head dim, causal, then sequence length, each in the order given (so that a run
    cut short by its time limit has measured the first ones asked for)."""
    shapes = []
    for dtype in dtypes:
        for op in ops:
            for head_dim in head_dims:
                for causal in causals:
                    for seqlen in seqlens:
                        batch = max(1, total_tokens // seqlen)
                        shapes.append(Shape(op, dtype, head_dim, heads_for(head_dim), batch,
                                            seqlen, causal))
    return shapes


# ---- results and the report (no PyTorch needed) ------------------------------------------------


@dataclasses.dataclass
class Result:
    """What one implementation did on one shape."""

    status: str  # "ok" (timed), "wrong", "n/a" (cannot run this shape) or "error"
    ms: float = 0.0
    tflops: float = 0.0
    runs: int = 0
    error: float = 0.0  # largest relative L2 error against the float32 reference
    bound: float = 0.0  # what it had to be within
    reason: str = ""

    def cell(self) -> str:
        if self.status == "ok":
            return f"{self.tflops:.1f}"
        if self.status == "wrong":
            return f"wrong (error {self.error:.1e} > {self.bound:.1e})"
        return f"{self.status} ({short(self.reason)})"


def short(text: str, limit: int = 60) -> str:
    """The first line of `text`, cut to `limit` characters, safe inside a table cell."""
    line = text.strip().splitlines()[0] if text.strip() else "no message"
    line = line.replace("|", "/")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def ratio_cell(results: Dict[str, Result]) -> str:
    """flashjit's TFLOP/s over the best peer's, naming that peer; "—" without both."""
    mine = results.get("flashjit")
    timed = [(r.tflops, name) for name, r in results.items()
             if name not in FLASHJIT and r.status == "ok"]
    if mine is None or mine.status != "ok" or not timed:
        return "—"
    best, name = max(timed)
    return f"{mine.tflops / best:.2f} ({name})"


def format_table(rows: Sequence[Tuple[Shape, Dict[str, Result]]]) -> str:
    """The markdown table: one row per measured shape, TFLOP/s per implementation."""
    head = (["op", "dtype", "head dim", "batch × heads", "seqlen", "causal"]
            + [f"{name} TFLOP/s" for name in IMPLEMENTATIONS] + ["flashjit / best peer"])
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for shape, results in rows:
        cells = [shape.op, shape.dtype, str(shape.head_dim), f"{shape.batch} × {shape.heads}",
                 str(shape.seqlen), "yes" if shape.causal else "no"]
        cells += [results[name].cell() if name in results else "not run"
                  for name in IMPLEMENTATIONS]
        cells.append(ratio_cell(results))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_notes(rows: Sequence[Tuple[Shape, Dict[str, Result]]]) -> str:
    """Each distinct reason an implementation was not timed, in full, with where it happened."""
    seen: Dict[Tuple[str, str], List[str]] = {}
    for shape, results in rows:
        for name, result in results.items():
            if result.status in ("n/a", "error"):
                seen.setdefault((name, result.reason.strip()), []).append(shape.label())
    lines = []
    for (name, reason), labels in seen.items():
        where = labels[0] + (f" and {len(labels) - 1} more" if len(labels) > 1 else "")
        lines.append(f"- {name}, {where}: {' '.join(reason.split())[:500]}")
    return "\n".join(lines)


def write_report(path: str, header: Sequence[str], rows, footer: Sequence[str]) -> None:
    """Writes the report atomically (a reader never sees half a file)."""
    notes = format_notes(rows)
    text = "\n".join(list(header) + ["", format_table(rows), ""]
                     + (["Not timed, and why:", "", notes, ""] if notes else [])
                     + list(footer)) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


# ---- the machine (no PyTorch needed) -----------------------------------------------------------


def command_output(args: Sequence[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def describe_commit() -> str:
    """$FLASHJIT_COMMIT (tools/gpu_run.sh sets it to the commit the build folder was made
    from), else the repository's HEAD, marked when the working tree differs from it."""
    if os.environ.get("FLASHJIT_COMMIT"):
        return os.environ["FLASHJIT_COMMIT"]
    commit = command_output(["git", "-C", REPO, "rev-parse", "HEAD"]) or "unknown"
    if command_output(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"]):
        commit += " plus uncommitted changes"
    return commit


def describe_gpu() -> str:
    line = command_output(["nvidia-smi", "--query-gpu=name,driver_version",
                           "--format=csv,noheader"]).splitlines()
    if not line:
        return "unknown (nvidia-smi gave nothing)"
    name, _, driver = line[0].partition(",")
    return f"{name.strip()}, driver {driver.strip()}"


def default_library() -> str:
    return os.environ.get("FLASHJIT_LIB",
                          os.path.join(REPO, "build", "release", "api", "libflashjit.so"))


# ---- the GPU part (PyTorch) ------------------------------------------------------------------


class Bench:
    """Inputs, reference, checks and timing on one GPU, with PyTorch."""

    def __init__(self, torch, args, flashjit, flashjit_problem: str):
        self.torch = torch
        self.args = args
        self.flashjit = flashjit
        self.flashjit_problem = flashjit_problem  # why flashjit cannot run, when it cannot
        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.peers = self._peer_factories()
        self.flex = None  # compiled lazily

    # -- timing --
    def time(self, fn: Callable[[], object]) -> Tuple[float, float, int]:
        """Median and min milliseconds of `fn` (CUDA events; warm-up runs first; the flush
        buffer written before each run; runs added until --budget-ms is spent)."""
        torch, args = self.torch, self.args
        for _ in range(args.warmup):
            fn()
        torch.cuda.synchronize()
        samples: List[float] = []
        batch = args.min_runs
        while True:
            events = [timed_call(torch, self.flush, fn) for _ in range(batch)]
            torch.cuda.synchronize()
            samples += [start.elapsed_time(stop) for start, stop in events]
            spent = sum(samples)
            if len(samples) >= args.max_runs or spent >= args.budget_ms:
                break
            per_run = max(spent / len(samples), 1e-3)
            batch = max(1, min(args.max_runs - len(samples),
                               math.ceil((args.budget_ms - spent) / per_run)))
        return statistics.median(samples), min(samples), len(samples)

    # -- inputs and reference --
    def inputs(self, shape: Shape):
        torch = self.torch
        dtype = torch.bfloat16 if shape.dtype == "bf16" else torch.float16
        gen = torch.Generator(device="cuda").manual_seed(self.args.seed)
        size = (shape.batch, shape.seqlen, shape.heads, shape.head_dim)  # [B, L, H, D] memory
        q, k, v, dout = (torch.randn(size, dtype=dtype, device="cuda", generator=gen)
                         for _ in range(4))
        return q, k, v, dout

    def attention_math(self, q, k, v, causal: bool, compute_dtype, dout=None):
        """Plain attention over [B, L, H, D] tensors in `compute_dtype`, a few heads at a time
        (a 16k x 16k score matrix per head is 1 GiB in float32): O, or with `dout` the
        gradients (dq, dk, dv) of sum(O * dout). Scores, probabilities and products are each
        rounded to compute_dtype, so in the input dtype this is the plain attention the checks
        compare against."""
        torch = self.torch
        B, L, H, D = q.shape
        scale = 1.0 / math.sqrt(D)
        per_chunk = max(1, (1 << 28) // (L * L))
        flat = [x.transpose(1, 2).reshape(B * H, L, D) for x in (q, k, v)]
        d_flat = dout.transpose(1, 2).reshape(B * H, L, D) if dout is not None else None
        mask = (torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
                if causal else None)
        outs: List[List] = [[], [], []] if dout is not None else [[]]
        for i in range(0, B * H, per_chunk):
            qc, kc, vc = (x[i:i + per_chunk].to(compute_dtype) for x in flat)
            if dout is not None:
                qc, kc, vc = (x.detach().requires_grad_() for x in (qc, kc, vc))
            with torch.set_grad_enabled(dout is not None):
                s = torch.matmul(qc, kc.transpose(1, 2)) * scale
                if mask is not None:
                    s = s.masked_fill(~mask, float("-inf"))
                o = torch.matmul(torch.softmax(s, dim=-1), vc)
                if dout is None:
                    outs[0].append(o.detach())
                else:
                    grads = torch.autograd.grad(o, (qc, kc, vc),
                                                d_flat[i:i + per_chunk].to(compute_dtype))
                    for j in range(3):
                        outs[j].append(grads[j].detach())
            del s, o
        return [torch.cat(parts).reshape(B, H, L, D).transpose(1, 2).float() for parts in outs]

    def rel_error(self, x, ref) -> float:
        x = x.float()
        if not bool(self.torch.isfinite(x).all()):
            return math.inf
        return float((x - ref).norm() / ref.norm().clamp_min(1e-30))

    def judge(self, outputs, refs, plains) -> Tuple[bool, float, float]:
        """Within twice the plain attention's error on every output? (error, its bound: for
        the output with the largest error relative to its bound)."""
        worst = (0.0, 0.0, 1.0)  # (error / bound, error, bound)
        for x, ref, plain in zip(outputs, refs, plains):
            bound = 2 * max(self.rel_error(plain, ref), 1e-6)
            error = self.rel_error(x, ref)
            worst = max(worst, (error / bound, error, bound))
        return worst[0] <= 1.0, worst[1], worst[2]

    # -- the implementations --
    def _peer_factories(self) -> Dict[str, Callable]:
        """Per peer, a function (shape, q, k, v, dout) -> (the call to time, its outputs as
        [B, L, H, D] views); it raises NotAvailable when the peer cannot run here."""
        factories: Dict[str, Callable] = {"flex": self._flex}
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError as e:
            reason = f"this PyTorch has no torch.nn.attention.sdpa_kernel ({e})"
            for name in PEERS[:3]:
                factories[name] = self._missing(reason)
            return factories
        for name, backend in (("sdpa-flash", "FLASH_ATTENTION"),
                              ("sdpa-efficient", "EFFICIENT_ATTENTION"),
                              ("sdpa-cudnn", "CUDNN_ATTENTION")):
            if hasattr(SDPBackend, backend):
                factories[name] = self._sdpa(getattr(SDPBackend, backend), sdpa_kernel)
            else:
                factories[name] = self._missing(f"this PyTorch's SDPBackend has no {backend}")
        return factories

    @staticmethod
    def _missing(reason: str):
        def factory(*_):
            raise NotAvailable(reason)
        return factory

    def _sdpa(self, backend, sdpa_kernel):
        F = self.torch.nn.functional

        def factory(shape: Shape, q, k, v, dout):
            # [B, H, L, D] views of the [B, L, H, D] memory: no copies for the flash backend.
            def forward(q, k, v):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                      v.transpose(1, 2), is_causal=shape.causal)
            return self._peer_call(shape, forward, q, k, v, dout, lambda: sdpa_kernel([backend]))
        return factory

    def _flex(self, shape: Shape, q, k, v, dout):
        torch = self.torch
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        except ImportError as e:
            raise NotAvailable(f"this PyTorch has no FlexAttention ({e})")
        if self.flex is None:
            import torch._dynamo
            # A compile per new shape: keep the recompile limit above the shape count, or
            # dynamo would fall back to the slow eager path.
            torch._dynamo.config.cache_size_limit = 1024
            if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
                torch._dynamo.config.accumulated_cache_size_limit = 4096
            # The backward is timed by repeated autograd.grad calls on one graph, which a
            # compiled graph with donated buffers refuses after the first (PyTorch 2.5 on).
            import torch._functorch.config as functorch_config
            if hasattr(functorch_config, "donated_buffer"):
                functorch_config.donated_buffer = False
            self.flex = torch.compile(flex_attention)
        block_mask = None
        if shape.causal:
            block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx,
                                           None, None, shape.seqlen, shape.seqlen, device="cuda")
        flex = self.flex

        def forward(q, k, v):
            return flex(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                        block_mask=block_mask)
        return self._peer_call(shape, forward, q, k, v, dout, None)

    def _peer_call(self, shape: Shape, forward, q, k, v, dout, context):
        """The call to time and the outputs to check for a PyTorch forward(q, k, v) returning
        [B, H, L, D]: the forward itself, or the backward (torch.autograd.grad of its output;
        the graph is built once, outside the timed call)."""
        import contextlib
        torch = self.torch
        context = context or contextlib.nullcontext
        if shape.op == "forward":
            with context():
                out = forward(q, k, v)

            def call_forward():
                with context():
                    return forward(q, k, v)
            return call_forward, [out.transpose(1, 2)]
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        with context():
            out = forward(*leaves)
        dout_view = dout.transpose(1, 2)

        def call_backward():
            return torch.autograd.grad(out, leaves, dout_view, retain_graph=True)
        return call_backward, list(call_backward())

    def flashjit_call(self, shape: Shape, q, k, v, dout, deterministic: bool = False):
        """flashjit's call to time and its outputs: the forward, or the backward after one
        untimed forward for its o and lse (as training keeps them)."""
        if self.flashjit is None:
            raise NotAvailable(self.flashjit_problem)
        if deterministic and shape.op == "forward":
            raise NotAvailable("the deterministic mode is the backward's")
        fj = self.flashjit

        def forward():
            return fj.attention(q, k, v, causal=shape.causal, return_lse=True)
        o, lse = forward()
        if shape.op == "forward":
            return forward, [o]

        def backward():
            return fj.attention_backward(dout, q, k, v, o, lse, causal=shape.causal,
                                         deterministic=deterministic)
        return backward, list(backward())

    def factory(self, name: str) -> Callable:
        if name in FLASHJIT:
            deterministic = name == "flashjit-deterministic"
            return lambda *args: self.flashjit_call(*args, deterministic=deterministic)
        return self.peers[name]

    # -- one shape --
    def measure(self, shape: Shape, names: Sequence[str]) -> Dict[str, Result]:
        """Every implementation in `names` on `shape`: checked, then timed."""
        torch = self.torch
        q, k, v, dout = self.inputs(shape)
        bwd = shape.op == "backward"
        refs = self.attention_math(q, k, v, shape.causal, torch.float32, dout if bwd else None)
        plains = self.attention_math(q, k, v, shape.causal, q.dtype, dout if bwd else None)
        results: Dict[str, Result] = {}
        for name in names:
            results[name] = self.measure_one(shape, name, q, k, v, dout, refs, plains)
            r = results[name]
            detail = (f"{r.ms:.4f} ms ({r.runs} runs), {r.tflops:.1f} TFLOP/s, error {r.error:.1e}"
                      if r.status == "ok" else r.cell() + (f": {r.reason}" if r.reason else ""))
            print(f"  {name:15s} {detail}", flush=True)
            torch.cuda.empty_cache()
        return results

    def measure_one(self, shape, name, q, k, v, dout, refs, plains) -> Result:
        torch = self.torch
        try:
            call, outputs = self.factory(name)(shape, q, k, v, dout)
            torch.cuda.synchronize()
            ok, error, bound = self.judge(outputs, refs, plains)
            del outputs
            if not ok:
                return Result("wrong", error=error, bound=bound)
            ms, _, runs = self.time(call)
            return Result("ok", ms=ms, tflops=shape.flops() / (ms * 1e-3) / 1e12, runs=runs,
                          error=error, bound=bound)
        except NotAvailable as e:
            return Result("n/a", reason=str(e))
        except torch.cuda.OutOfMemoryError as e:
            return Result("n/a", reason=f"out of GPU memory: {e}")
        except Exception as e:  # a peer that cannot run a shape says so in its own words
            kind = "n/a" if name not in FLASHJIT else "error"
            return Result(kind, reason=f"{type(e).__name__}: {e}")


class NotAvailable(Exception):
    """An implementation that cannot run a shape here (not a failure of the run)."""


# ---- the command line --------------------------------------------------------------------------


def int_list(text: str) -> List[int]:
    try:
        values = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, not '{text}'")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers, not '{text}'")
    return values


def choice_list(allowed: Sequence[str]):
    def parse(text: str) -> List[str]:
        values = [x for x in text.split(",") if x]
        bad = [x for x in values if x not in allowed]
        if bad or not values:
            raise argparse.ArgumentTypeError(
                f"'{text}': each must be one of {', '.join(allowed)}")
        return values
    return parse


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="markdown report to write (required unless --list-shapes)")
    p.add_argument("--lib", default=default_library(),
                   help="libflashjit.so (default: $FLASHJIT_LIB or build/release/api/)")
    p.add_argument("--head-dims", type=int_list, default=[128, 64, 256],
                   help="head dims, comma-separated (default 128,64,256)")
    p.add_argument("--seqlens", type=int_list,
                   default=[512, 1024, 2048, 4096, 8192, 16384],
                   help="sequence lengths (default 512 to 16384, doubling)")
    p.add_argument("--total-tokens", type=int, default=16384,
                   help="batch x seqlen of every shape (default 16384)")
    p.add_argument("--dtypes", type=choice_list(["bf16", "fp16"]), default=["bf16", "fp16"])
    p.add_argument("--ops", type=choice_list(["forward", "backward"]),
                   default=["forward", "backward"])
    p.add_argument("--causal", choices=["both", "true", "false"], default="both")
    p.add_argument("--impls", type=choice_list(list(IMPLEMENTATIONS)),
                   default=list(IMPLEMENTATIONS), help="implementations to run (default all)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    p.add_argument("--min-runs", type=int, default=5, help="timed runs at least (default 5)")
    p.add_argument("--max-runs", type=int, default=100, help="timed runs at most (default 100)")
    p.add_argument("--budget-ms", type=float, default=100.0,
                   help="stop adding timed runs once their GPU time passes this (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--time-limit-s", type=float, default=0,
                   help="start no new shape after this many seconds (0: no limit)")
    p.add_argument("--list-shapes", action="store_true",
                   help="print the shapes and their FLOPs, then exit (no PyTorch or GPU needed)")
    args = p.parse_args(argv)
    if not args.list_shapes and not args.out:
        p.error("--out is required (the markdown report to write)")
    if args.warmup < 0 or args.min_runs < 1 or args.max_runs < args.min_runs:
        p.error("--warmup must be >= 0, --min-runs >= 1 and --max-runs >= --min-runs")
    return args


def shapes_of(args: argparse.Namespace) -> List[Shape]:
    causals = {"both": [False, True], "true": [True], "false": [False]}[args.causal]
    return make_shapes(args.head_dims, args.seqlens, args.dtypes, args.ops, causals,
                       args.total_tokens)


class Stop(Exception):
    """SIGTERM (a timeout): finish the report with what was measured."""


def on_sigterm(signum, frame):
    raise Stop()


def run(args: argparse.Namespace, shapes: List[Shape]) -> int:
    try:
        import torch
    except ImportError as e:
        print(f"attention.py: PyTorch is needed to run the benchmark ({e})", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("attention.py: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False  # the float32 reference stays float32
    torch.cuda.init()
    flashjit, problem = open_flashjit(args.lib)
    if flashjit is None:
        print(f"attention.py: flashjit column is n/a: {problem}", flush=True)
    bench = Bench(torch, args, flashjit, problem)
    started = time.monotonic()
    command = "python3 bench/attention.py " + " ".join(sys.argv[1:])
    header = [
        "# Attention forward and backward: flashjit against PyTorch SDPA and FlexAttention",
        "",
        f"Measured on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
        f"{describe_gpu()} (nvidia-smi), commit {describe_commit()}, with `{command}`.",
        f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}); flashjit "
        f"{flashjit.version() if flashjit else 'not loaded'} from `{args.lib}`, tuning policy "
        f"{os.environ.get('FLASHJIT_TUNING', 'cached (the default)')}.",
        "",
        "Method: the same random inputs ([B, L, H, D] memory; PyTorch gets [B, H, L, D] views)",
        "for every implementation; each output is first checked against a float32 reference and",
        "must be within twice the relative L2 error of a plain attention in the input dtype, or",
        f"it is reported wrong and not timed. Timing: {TIMING_METHOD}; "
        f"{args.warmup} warm-up runs, then the median of {args.min_runs} to {args.max_runs} runs "
        f"within {args.budget_ms:g} ms.",
        "Backward times the backward alone (PyTorch: torch.autograd.grad of one forward's output;",
        "flashjit: its backward call given o and lse). TFLOP/s: forward 4·B·H·L²·D (halved when",
        "causal), backward 2.5× forward. Ratio: flashjit's TFLOP/s over the best peer's.",
    ]
    rows: List[Tuple[Shape, Dict[str, Result]]] = []
    footer: List[str] = []
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for i, shape in enumerate(shapes):
            elapsed = time.monotonic() - started
            if args.time_limit_s and elapsed > args.time_limit_s:
                footer.append(f"Stopped at the time limit ({args.time_limit_s:g} s): "
                              f"{len(shapes) - i} of {len(shapes)} shapes not run.")
                break
            print(f"[{i + 1}/{len(shapes)}] {shape.label()} ({elapsed:.0f} s)", flush=True)
            rows.append((shape, bench.measure(shape, args.impls)))
            write_report(args.out, header, rows, footer)
    except (KeyboardInterrupt, Stop):
        footer.append(f"Interrupted after {len(rows)} of {len(shapes)} shapes (the last "
                      "one may be incomplete).")
    write_report(args.out, header, rows, footer)
    print(format_table(rows), flush=True)
    print(f"wrote {args.out}")
    return 0


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    shapes = shapes_of(args)
    if args.list_shapes:
        for shape in shapes:
            print(f"{shape.label():48s} {shape.flops() / 1e9:10.1f} GFLOP")
        print(f"{len(shapes)} shapes")
        return 0
    return run(args, shapes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
