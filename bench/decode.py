#!/usr/bin/env python3
"""Decoding on a KV cache on the GPU: flashjit against its peers, in GB/s, in one run.

Decoding reads the whole KV cache once per token and does little arithmetic, so it is measured
in bytes moved per second: (K + V + Q + O) bytes of the call over its median time, and as a
fraction of the GPU's copy bandwidth, measured in the same run (a device-to-device copy of
1 GiB: 2 GiB moved). The shapes, each suite selectable with --suites:
- grid: batch 1, 8, 64 and 256 at contexts 1k, 4k, 32k and 128k, GQA 32:4, head dim 128,
  bf16, pages of 16, one query token (and four with --queries 1,4: speculative decoding);
- pages: pages of 1 and 64 keys at batch 8 and 32k (16 is the grid's);
- fp8: an e4m3 cache (descale 1) at batch 8 and 64, contexts 4k and 32k;
- gqa: 8 query heads on 1 key/value head at batch 8 and 64, contexts 4k and 32k;
- mla: MLA's absorbed decoding (128 heads on one latent head of 576, V its first 512 columns,
  read with the keys) at batch 1, 8 and 64, contexts 4k and 32k, pages of 64.
Shapes whose cache is larger than --max-cache-gb are left out (the peers need a dense copy).

Implementations, each on the same random cache and checked before it is timed (relative L2
error within twice that of plain attention in bf16, against a float32 reference):
- flashjit: flashjit.attention_with_kvcache (the Python package in python/, on the library
  --lib names) on a paged cache in a shuffled order; splits chosen by flashjit;
- sdpa: PyTorch's scaled_dot_product_attention on the dense cache (its own backend choice);
- flash-attn: flash_attn_with_kvcache on a paged cache of 256-key pages (FlashAttention-2's
  smallest), when the flash_attn package is installed;
- flashinfer: BatchDecodeWithPagedKVCacheWrapper on the shape's pages, when flashinfer is
  installed.
A peer that cannot run a shape is reported "n/a (reason)".

Timing and the report follow bench/attention.py (CUDA events, warm-up, median, L2 flushed, a GPU
spin); --list-shapes needs neither PyTorch nor a GPU.
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
    page_size: int = 16
    kv: str = "bf16"  # the cache's elements: bf16, or e4m3 codes
    head_dim_v: int = 0  # V's and O's head dim (0: head_dim)
    values_in_keys: bool = False  # V is K's first head_dim_v columns (MLA's latent cache)

    @property
    def dim_v(self) -> int:
        return self.head_dim_v or self.head_dim

    def label(self) -> str:
        dims = f"d{self.head_dim}" + (f"/{self.dim_v}" if self.dim_v != self.head_dim else "")
        cache = f" {self.kv} cache" if self.kv != self.dtype else ""
        return (f"decode {self.dtype}{cache} {dims} b{self.batch} q{self.queries} "
                f"h{self.heads}/{self.heads_kv} ctx{self.context} pages{self.page_size}")

    def cache_bytes(self) -> float:
        """K and V (K alone when V is in it), as the cache holds them."""
        element = 1 if self.kv == "e4m3" else 2
        columns = self.head_dim + (0 if self.values_in_keys else self.dim_v)
        return float(self.batch * self.context * self.heads_kv * columns * element)

    def bytes_moved(self) -> float:
        """The cache read once, Q read and O written once (2-byte elements)."""
        queries = 2.0 * self.batch * self.queries * self.heads * (self.head_dim + self.dim_v)
        return self.cache_bytes() + queries


SUITES = ("grid", "pages", "fp8", "gqa", "mla")


def make_shapes(args) -> List[DecodeShape]:
    shapes: List[DecodeShape] = []
    if "grid" in args.suites:
        shapes += [DecodeShape(b, c, q) for q in args.queries for b in args.batches
                   for c in args.contexts]
    if "pages" in args.suites:
        shapes += [DecodeShape(8, 32768, page_size=p) for p in (1, 64)]
    if "fp8" in args.suites:
        shapes += [DecodeShape(b, c, kv="e4m3") for b in (8, 64) for c in (4096, 32768)]
    if "gqa" in args.suites:
        shapes += [DecodeShape(b, c, heads=8, heads_kv=1) for b in (8, 64) for c in (4096, 32768)]
    if "mla" in args.suites:
        shapes += [DecodeShape(b, c, heads=128, heads_kv=1, head_dim=576, head_dim_v=512,
                               values_in_keys=True, page_size=64)
                   for b in (1, 8, 64) for c in (4096, 32768)]
    return [s for s in shapes if s.cache_bytes() <= args.max_cache_gb * 1e9]


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
        """q [B, Lq, H, D], and k [B, L, Hkv, D] and v [B, L, Hkv, Dv] in the cache's elements
        (e4m3 codes for an fp8 cache; v a view of k's first columns for MLA)."""
        torch = self.torch
        gen = torch.Generator(device="cuda").manual_seed(self.args.seed)
        dtype = torch.bfloat16 if s.dtype == "bf16" else torch.float16
        q = torch.randn(s.batch, s.queries, s.heads, s.head_dim, dtype=dtype, device="cuda",
                        generator=gen)
        k = torch.randn(s.batch, s.context, s.heads_kv, s.head_dim, dtype=dtype, device="cuda",
                        generator=gen)
        v = (k[..., :s.dim_v] if s.values_in_keys else
             torch.randn(s.batch, s.context, s.heads_kv, s.dim_v, dtype=dtype, device="cuda",
                         generator=gen))
        if s.kv == "e4m3":
            k, v = (x.to(torch.float8_e4m3fn) for x in (k, v))
        return q, k, v

    def attention(self, s: DecodeShape, q, k, v, dtype):
        """Plain causal (bottom-right) attention in `dtype` over [B, L, H, D] tensors, one
        sequence at a time, each key/value head's group of query heads as one matrix (no key
        repeated: a float32 copy of a 64 x 32k cache per query head would not fit)."""
        torch = self.torch
        group = s.heads // s.heads_kv
        rows = torch.arange(group * s.queries, device="cuda")[:, None] % s.queries
        hidden = torch.arange(s.context, device="cuda")[None, :] > rows + s.context - s.queries
        outs = []
        for b in range(s.batch):
            # [Hkv, group · Lq, D]: row g · Lq + t is query t of head kv · group + g.
            qh = (q[b].to(dtype).reshape(s.queries, s.heads_kv, group, s.head_dim)
                  .permute(1, 2, 0, 3).reshape(s.heads_kv, group * s.queries, s.head_dim))
            kh = k[b].to(dtype).transpose(0, 1)
            vh = v[b].to(dtype).transpose(0, 1)
            scores = torch.matmul(qh, kh.transpose(1, 2)) / math.sqrt(s.head_dim)
            probs = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
            out = torch.matmul(probs, vh).reshape(s.heads_kv, group, s.queries, s.dim_v)
            outs.append(out.permute(2, 0, 1, 3).reshape(1, s.queries, s.heads, s.dim_v).float())
            del kh, vh, scores, probs
        return torch.cat(outs)

    def pages(self, s: DecodeShape, k, v, page_size: int):
        """k and v as shuffled pages [num_pages, page_size, heads_kv, head_dim] (v a view of
        k's pages when it is k's columns) and the int32 page table [batch, pages per sequence]."""
        torch = self.torch
        per_seq = s.context // page_size
        count = s.batch * per_seq
        order = torch.randperm(count, device="cuda")

        def paged(x):
            pages = torch.empty(count, page_size, s.heads_kv, x.shape[-1], dtype=x.dtype,
                                device="cuda")
            pages[order] = x.reshape(count, page_size, s.heads_kv, x.shape[-1])
            return pages
        k_pages = paged(k)
        v_pages = k_pages[..., :s.dim_v] if s.values_in_keys else paged(v)
        return k_pages, v_pages, order.to(torch.int32).reshape(s.batch, per_seq).contiguous()

    # -- implementations: (the call to time, its output as [B, Lq, H, D]) --
    def flashjit_call(self, s: DecodeShape, q, k, v):
        if self.flashjit is None:
            raise common.NotAvailable(self.flashjit_problem)
        torch, fj = self.torch, self.flashjit
        k_pages, v_pages, table = self.pages(s, k, v, s.page_size)
        lengths = torch.full((s.batch,), s.context, dtype=torch.int32, device="cuda")

        def call():
            return fj.attention_with_kvcache(q, k_pages, v_pages, lengths, block_table=table,
                                             causal=True)
        return call, call()

    def sdpa_call(self, s: DecodeShape, q, k, v):
        if s.kv == "e4m3":
            raise common.NotAvailable("it reads no fp8 cache")
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
        if s.kv == "e4m3" or s.head_dim > 256:
            raise common.NotAvailable("FlashAttention-2 takes 16-bit caches of head dims to 256")
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
        if s.dim_v != s.head_dim:
            raise common.NotAvailable("MLA has a wrapper of its own, not timed here")
        torch = self.torch
        k_pages, v_pages, table = self.pages(s, k, v, s.page_size)
        per_seq = table.shape[1]
        indptr = torch.arange(0, s.batch + 1, dtype=torch.int32, device="cuda") * per_seq
        last = torch.full((s.batch,), s.page_size, dtype=torch.int32, device="cuda")
        workspace = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
        wrapper.plan(indptr, table.reshape(-1), last, s.heads, s.heads_kv, s.head_dim,
                     s.page_size, data_type=k_pages.dtype, q_data_type=q.dtype)
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
    p.add_argument("--suites", type=common.choice_list(list(SUITES)), default=list(SUITES),
                   help="which shapes: " + ", ".join(SUITES) + " (comma-separated; default all)")
    p.add_argument("--batches", type=common.int_list, default=[1, 8, 64, 256],
                   help="the grid's batches")
    p.add_argument("--contexts", type=common.int_list, default=[1024, 4096, 32768, 131072],
                   help="the grid's contexts")
    p.add_argument("--queries", type=common.int_list, default=[1], help="the grid's queries")
    p.add_argument("--max-cache-gb", type=float, default=8.0,
                   help="leave out shapes whose cache is larger (the peers take a dense copy)")
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
    shapes = make_shapes(args)
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
