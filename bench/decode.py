#!/usr/bin/env python3
"""Decoding on a KV cache on the GPU: flashjit against its peers, in GB/s, in one run.

Decoding reads the whole KV cache once per token and does little arithmetic, so it is measured
in bytes moved per second: (K + V + Q + O) bytes of the call over its median time, and as a
fraction of the GPU's copy bandwidth, measured in the same run (a device-to-device copy of
1 GiB: 2 GiB moved). Shapes: batch 1 to 64, context 1k to 32k, GQA 8:1 (32 query heads on
4 key/value heads), head dim 128, bf16, one query token (and four: speculative decoding).

Implementations, each on the same random cache and checked before it is timed (relative L2
error within twice that of plain attention in bf16, against a float32 reference):
- flashjit: flashjit.attention_with_kvcache (the Python package in python/, on the library
  --lib names) on a paged cache of 16-key pages in a shuffled order; splits chosen by flashjit;
- sdpa: PyTorch's scaled_dot_product_attention on the dense cache (its own backend choice);
- flash-attn: flash_attn_with_kvcache on a paged cache of 256-key pages (FlashAttention-2's
  smallest), when the flash_attn package is installed;
- flashinfer: BatchDecodeWithPagedKVCacheWrapper on 16-key pages, when flashinfer is installed.
A peer that cannot run is reported "n/a (reason)".

Timing and the report follow bench/attention.py (CUDA events, warm-up, median, L2 flushed, a GPU spin);
--list-shapes needs neither PyTorch nor a GPU.
"""

import argparse
import dataclasses
import math
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attention as common  # noqa: E402  (the timing, checks and machine helpers)

PEERS = ("sdpa", "flash-attn", "flashinfer")
IMPLEMENTATIONS = ("flashjit",) + PEERS


@dataclasses.dataclass
class Outcome:
    """What one implementation did on one shape: GB/s when timed, else why not."""

    gbs: Optional[float] = None
    note: str = ""

    def cell(self) -> str:
        return f"{self.gbs:.0f} ({self.note})" if self.gbs is not None else self.note


@dataclasses.dataclass(frozen=True)
class DecodeShape:
    batch: int
    context: int
    queries: int = 1
    heads: int = 32
    heads_kv: int = 4
    head_dim: int = 128
    dtype: str = "bf16"

    def label(self) -> str:
        return (f"decode {self.dtype} d{self.head_dim} b{self.batch} q{self.queries} "
                f"h{self.heads}/{self.heads_kv} ctx{self.context}")

    def bytes_moved(self) -> float:
        """K and V read once, Q read and O written once (2-byte elements)."""
        cache = 2.0 * self.batch * self.context * self.heads_kv * self.head_dim
        queries = 2.0 * self.batch * self.queries * self.heads * self.head_dim
        return 2 * (cache + queries)


def make_shapes(batches: Sequence[int], contexts: Sequence[int],
                queries: Sequence[int]) -> List[DecodeShape]:
    return [DecodeShape(b, c, q) for q in queries for b in batches for c in contexts]


class DecodeBench:
    """One shape's cache, reference and implementations, with PyTorch."""

    def __init__(self, torch, args, flashjit, flashjit_problem: str):
        self.torch = torch
        self.args = args
        self.timer = common.Bench(torch, args, flashjit, flashjit_problem)  # time(), judge()
        self.flashjit = flashjit
        self.flashjit_problem = flashjit_problem

    def copy_bandwidth(self) -> float:
        """GB/s of a device-to-device copy of 1 GiB (read plus write)."""
        torch = self.torch
        src = torch.empty(1 << 28, dtype=torch.int32, device="cuda")
        dst = torch.empty_like(src)
        median, _, _ = self.timer.time(lambda: dst.copy_(src))
        return 2 * src.numel() * 4 / (median * 1e-3) / 1e9

    def inputs(self, s: DecodeShape):
        torch = self.torch
        gen = torch.Generator(device="cuda").manual_seed(self.args.seed)
        dtype = torch.bfloat16 if s.dtype == "bf16" else torch.float16
        q = torch.randn(s.batch, s.queries, s.heads, s.head_dim, dtype=dtype, device="cuda",
                        generator=gen)
        k, v = (torch.randn(s.batch, s.context, s.heads_kv, s.head_dim, dtype=dtype,
                            device="cuda", generator=gen) for _ in range(2))
        return q, k, v

    def attention(self, s: DecodeShape, q, k, v, dtype):
        """Plain causal (bottom-right) attention in `dtype` over [B, L, H, D] tensors, one
        sequence at a time (a float32 copy of a whole 64 x 32k cache with repeated heads would
        not fit)."""
        torch = self.torch
        group = s.heads // s.heads_kv
        rows = torch.arange(s.queries, device="cuda")[:, None] + s.context - s.queries
        hidden = torch.arange(s.context, device="cuda")[None, :] > rows
        outs = []
        for b in range(s.batch):
            qh = q[b:b + 1].transpose(1, 2).to(dtype)
            kh = k[b:b + 1].transpose(1, 2).repeat_interleave(group, dim=1).to(dtype)
            vh = v[b:b + 1].transpose(1, 2).repeat_interleave(group, dim=1).to(dtype)
            scores = torch.matmul(qh, kh.transpose(2, 3)) / math.sqrt(s.head_dim)
            probs = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
            outs.append(torch.matmul(probs, vh).transpose(1, 2).float())
            del kh, vh, scores, probs
        return torch.cat(outs)

    def pages(self, s: DecodeShape, k, v, page_size: int):
        """k and v as shuffled pages [num_pages, page_size, heads_kv, head_dim] and the int32
        page table [batch, pages per sequence]."""
        torch = self.torch
        per_seq = s.context // page_size
        count = s.batch * per_seq
        order = torch.randperm(count, device="cuda")
        k_pages = torch.empty(count, page_size, s.heads_kv, s.head_dim, dtype=k.dtype,
                              device="cuda")
        v_pages = torch.empty_like(k_pages)
        k_pages[order] = k.reshape(count, page_size, s.heads_kv, s.head_dim)
        v_pages[order] = v.reshape(count, page_size, s.heads_kv, s.head_dim)
        return k_pages, v_pages, order.to(torch.int32).reshape(s.batch, per_seq).contiguous()

    # -- implementations: (the call to time, its output as [B, Lq, H, D]) --
    def flashjit_call(self, s: DecodeShape, q, k, v):
        if self.flashjit is None:
            raise common.NotAvailable(self.flashjit_problem)
        torch, fj = self.torch, self.flashjit
        k_pages, v_pages, table = self.pages(s, k, v, 16)
        lengths = torch.full((s.batch,), s.context, dtype=torch.int32, device="cuda")

        def call():
            return fj.attention_with_kvcache(q, k_pages, v_pages, lengths, block_table=table,
                                             causal=True)
        return call, call()

    def sdpa_call(self, s: DecodeShape, q, k, v):
        torch = self.torch
        F = torch.nn.functional
        qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))
        kwargs = {}
        try:
            F.scaled_dot_product_attention(qh[:1, :, :1], kh[:1, :, :1], vh[:1, :, :1],
                                           enable_gqa=True)
            kwargs["enable_gqa"] = True
        except TypeError:  # an older PyTorch: the key/value heads repeated (more bytes read)
            group = s.heads // s.heads_kv
            kh, vh = (x.repeat_interleave(group, dim=1) for x in (kh, vh))
        # Bottom-right causal for several queries: the last query sees every key.
        mask = None
        if s.queries > 1:
            rows = torch.arange(s.queries, device="cuda")[:, None] + s.context - s.queries
            mask = torch.arange(s.context, device="cuda")[None, :] <= rows

        def call():
            return F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, **kwargs)
        return call, call().transpose(1, 2)

    def flash_attn_call(self, s: DecodeShape, q, k, v):
        try:
            from flash_attn import flash_attn_with_kvcache
        except ImportError as e:
            raise common.NotAvailable(f"flash_attn is not installed ({e})")
        if s.context % 256 != 0:
            raise common.NotAvailable("FlashAttention-2's pages are 256 keys")
        k_pages, v_pages, table = self.pages(s, k, v, 256)
        lengths = self.torch.full((s.batch,), s.context, dtype=self.torch.int32, device="cuda")

        def call():
            return flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=lengths,
                                           block_table=table, causal=True)
        return call, call()

    def flashinfer_call(self, s: DecodeShape, q, k, v):
        try:
            import flashinfer
        except ImportError as e:
            raise common.NotAvailable(f"flashinfer is not installed ({e})")
        if s.queries != 1:
            raise common.NotAvailable("its decode wrapper takes one query per sequence")
        torch = self.torch
        k_pages, v_pages, table = self.pages(s, k, v, 16)
        per_seq = table.shape[1]
        indptr = torch.arange(0, s.batch + 1, dtype=torch.int32, device="cuda") * per_seq
        last = torch.full((s.batch,), 16, dtype=torch.int32, device="cuda")
        workspace = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
        wrapper.plan(indptr, table.reshape(-1), last, s.heads, s.heads_kv, s.head_dim, 16,
                     data_type=q.dtype, q_data_type=q.dtype)
        q3 = q[:, 0]

        def call():
            return wrapper.run(q3, (k_pages, v_pages))
        return call, call()[:, None]

    def measure(self, s: DecodeShape, copy_gbs: float) -> Dict[str, Outcome]:
        torch = self.torch
        q, k, v = self.inputs(s)
        reference = self.attention(s, q, k, v, torch.float32)
        plain = self.attention(s, q, k, v, q.dtype)
        factories = {"flashjit": self.flashjit_call, "sdpa": self.sdpa_call,
                     "flash-attn": self.flash_attn_call, "flashinfer": self.flashinfer_call}
        results: Dict[str, Outcome] = {}
        for name in self.args.impls:
            try:
                call, out = factories[name](s, q, k, v)
                ok, error, bound = self.timer.judge([out], [reference], [plain])
                if not ok:
                    results[name] = Outcome(note=f"wrong: error {error:.3g} > {bound:.3g}")
                    continue
                median, _, runs = self.timer.time(call)
                gbs = s.bytes_moved() / (median * 1e-3) / 1e9
                results[name] = Outcome(gbs, f"{gbs / copy_gbs:.0%} of copy, {runs} runs")
            except common.NotAvailable as e:
                results[name] = Outcome(note=f"n/a ({common.short(str(e))})")
            except Exception as e:  # one implementation failing never stops the run
                results[name] = Outcome(note=f"failed: {common.short(str(e))}")
        return results


def format_table(rows: Sequence[Tuple[DecodeShape, Dict[str, Outcome]]],
                 impls: Sequence[str]) -> str:
    """One row per shape: GB/s (and the fraction of copy bandwidth) per implementation, and
    flashjit's GB/s over the best peer's."""
    head = ["shape"] + [f"{name} GB/s" for name in impls] + ["flashjit / best peer"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for shape, results in rows:
        cells = [shape.label()] + [results[n].cell() if n in results else "not run"
                                   for n in impls]
        mine = results.get("flashjit")
        timed = [(r.gbs, n) for n, r in results.items() if n != "flashjit" and r.gbs]
        ratio = "—"
        if mine is not None and mine.gbs and timed:
            best, name = max(timed)
            ratio = f"{mine.gbs / best:.2f} ({name})"
        lines.append("| " + " | ".join(cells + [ratio]) + " |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="markdown report to write (required unless --list-shapes)")
    p.add_argument("--lib", default=common.default_library(), help="libflashjit.so")
    p.add_argument("--batches", type=common.int_list, default=[1, 8, 32, 64])
    p.add_argument("--contexts", type=common.int_list, default=[1024, 4096, 16384, 32768])
    p.add_argument("--queries", type=common.int_list, default=[1, 4])
    p.add_argument("--impls", type=common.choice_list(list(IMPLEMENTATIONS)),
                   default=list(IMPLEMENTATIONS))
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--min-runs", type=int, default=5)
    p.add_argument("--max-runs", type=int, default=100)
    p.add_argument("--budget-ms", type=float, default=50.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--list-shapes", action="store_true",
                   help="print the shapes and their bytes; needs neither PyTorch nor a GPU")
    args = p.parse_args(argv)
    if not args.list_shapes and not args.out:
        p.error("--out is required")
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    shapes = make_shapes(args.batches, args.contexts, args.queries)
    if args.list_shapes:
        for s in shapes:
            print(f"{s.label()}  {s.bytes_moved() / 1e6:.1f} MB")
        return 0
    import torch
    flashjit, problem = common.open_flashjit(args.lib)
    bench = DecodeBench(torch, args, flashjit, problem)
    copy_gbs = bench.copy_bandwidth()
    header = ["# Decoding on a KV cache: flashjit and its peers, GB/s", "",
              f"- commit: {common.describe_commit()}", f"- GPU: {common.describe_gpu()}",
              f"- copy bandwidth measured in this run: {copy_gbs:.0f} GB/s (1 GiB, "
              "device to device, read plus write)",
              "- command: python3 bench/decode.py " + " ".join(argv)]
    rows: List[Tuple[DecodeShape, Dict[str, Outcome]]] = []
    for s in shapes:
        rows.append((s, bench.measure(s, copy_gbs)))
        print(s.label(), {k: r.cell() for k, r in rows[-1][1].items()}, flush=True)
        text = "\n".join(header + ["", format_table(rows, args.impls), ""]) + "\n"
        with open(args.out + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
