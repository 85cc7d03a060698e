"""Float64 references for the package's tests, written here from the formulas (not from
flashjit): attention with its masks, softcap and GQA; its gradients through torch's float64
autograd of the same formula."""

import math

import numpy as np
import torch


def visible(seqlen_q: int, seqlen_k: int, causal: bool, window) -> np.ndarray:
    """[seqlen_q, seqlen_k]: whether query i sees key j (bottom-right aligned diagonal)."""
    left, right = window
    if causal:
        right = 0
    i = np.arange(seqlen_q)[:, None]
    j = np.arange(seqlen_k)[None, :]
    diagonal = i + seqlen_k - seqlen_q
    seen = np.ones((seqlen_q, seqlen_k), dtype=bool)
    if right >= 0:
        seen &= j <= diagonal + right
    if left >= 0:
        seen &= j >= diagonal - left
    return seen


_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key):
    """Philox4x32-10 (Salmon et al., SC 2011) of four uint64 arrays holding 32-bit counter words
    under two 32-bit key words: the four output words."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = (np.uint64(k) for k in key)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _MASK32,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _MASK32)
        k0 = (k0 + np.uint64(0x9E3779B9)) & _MASK32
        k1 = (k1 + np.uint64(0xBB67AE85)) & _MASK32
    return c0, c1, c2, c3


def dropout_factors(p: float, seed: int, offset: int, b: int, hq: int, sq: int, sk: int,
                    first_batch: int = 0):
    """[b, hq, sq, sk] float64: 1 / (1 − p) where flashjit's dropout keeps (b, h, i, j), 0 where
    it drops, from the documented generator (docs/attention.md#dropout), written here from that
    text: one Philox call per 2 × 2 block, counter (j / 2, i / 2, b · hq + h, offset's low
    word), key (seed's low word, seed's high word xor offset's high word), word 2(i % 2) + j % 2,
    kept when at least ⌊p · 2³²⌋ (p as float32, as the C API holds it). `first_batch`: the
    batch entry of b = 0 (a variable-length call's sequence, as a batch of its own)."""
    bh = np.arange(first_batch * hq, (first_batch + b) * hq, dtype=np.uint64)[:, None, None]
    i = np.arange(sq, dtype=np.uint64)[None, :, None]
    j = np.arange(sk, dtype=np.uint64)[None, None, :]
    shape = (b * hq, sq, sk)
    counter = [np.broadcast_to(x, shape) for x in
               (j >> np.uint64(1), i >> np.uint64(1), bh, np.uint64(offset & 0xFFFFFFFF))]
    words = philox4x32_10(counter, (seed & 0xFFFFFFFF, (seed >> 32) ^ (offset >> 32)))
    pick = np.broadcast_to((i & np.uint64(1)) * np.uint64(2) + (j & np.uint64(1)), shape)
    word = np.choose(pick.astype(np.int64), words)
    threshold = np.uint64(math.floor(float(np.float32(p)) * 2.0 ** 32))
    kept = word >= threshold
    return np.where(kept, 1.0 / (1.0 - p), 0.0).reshape(b, hq, sq, sk)


def attention(q, k, v, causal=False, window=(-1, -1), softcap=0.0, scale=None,
              alibi_slopes=None, sinks=None, dropout=None, first_batch=0):
    """(o, lse) in float64 torch tensors, for q [b, sq, hq, d], k and v [b, sk, hk, d] (any
    float dtype, numpy or torch); differentiable when the inputs require grad. alibi_slopes
    ([hq] or [b, hq]) adds −slope · |i + sk − sq − j| to the capped score of query i, key j.
    sinks ([hq]) adds e^sink to every row's denominator of head h (and to its LSE). dropout
    (p, seed, offset): o = (P ∘ Z) V with dropout_factors' Z (the LSE is P's), batch entry 0
    being `first_batch`."""
    q, k, v = (torch.as_tensor(np.asarray(x, dtype=np.float64)) if isinstance(x, np.ndarray)
               else x for x in (q, k, v))
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    group = hq // hk
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi_slopes is not None:
        slopes = torch.as_tensor(np.asarray(alibi_slopes, dtype=np.float64))
        slopes = slopes.expand(b, hq)[:, :, None, None]
        i = torch.arange(sq, dtype=torch.float64)[:, None]
        j = torch.arange(sk, dtype=torch.float64)[None, :]
        s = s - slopes * (i + sk - sq - j).abs()
    seen = torch.as_tensor(visible(sq, sk, causal, window))
    s = s.masked_fill(~seen, -math.inf)
    if sinks is not None:  # one more term per row, which adds nothing to o
        sink = torch.as_tensor(sinks).to(torch.float64)[None, :, None, None]
        lse = torch.logsumexp(torch.cat([s, sink.expand(b, hq, sq, 1)], dim=-1), dim=-1)
    else:
        lse = torch.logsumexp(s, dim=-1)  # -inf for a row that sees nothing
    p = torch.where(seen, torch.exp(s - lse.unsqueeze(-1).clamp_min(-1e300)),
                    torch.zeros((), dtype=s.dtype))
    p = torch.nan_to_num(p)
    if dropout is not None:
        p = p * torch.as_tensor(dropout_factors(*dropout, b, hq, sq, sk, first_batch))
    o = torch.einsum("bhqk,bkhd->bqhd", p, v)
    return o, lse


def relative_error(actual, expected) -> float:
    """||actual - expected|| / ||expected|| in float64 (finite entries of expected)."""
    a = np.asarray(actual.float().numpy() if isinstance(actual, torch.Tensor) else actual,
                   dtype=np.float64)
    e = np.asarray(expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected,
                   dtype=np.float64)
    finite = np.isfinite(e)
    assert np.array_equal(np.isfinite(a), finite), "non-finite values where the reference has none"
    return float(np.linalg.norm(a[finite] - e[finite]) / max(np.linalg.norm(e[finite]), 1e-30))


def multiscale(q, k, v, mask, scale=None):
    """Multi-scale attention in float64 torch tensors: S = scale (q k^T) o M per batch and head,
    o = S v / max(rowsum(|S|), 1); mask [heads_q, seqlen_q, seqlen_k]; differentiable."""
    b, sq, hq, d = q.shape
    group = hq // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale * mask
    r = s.abs().sum(dim=-1, keepdim=True).clamp_min(1.0)
    return torch.einsum("bhqk,bkhd->bqhd", s / r, v)


def decay_mask(gammas, seqlen_q: int, seqlen_k: int):
    """[heads, seqlen_q, seqlen_k] float64: gamma^(n - m) where m <= n = i + seqlen_k - seqlen_q,
    else 0."""
    i = torch.arange(seqlen_q, dtype=torch.float64)[:, None] + (seqlen_k - seqlen_q)
    distance = i - torch.arange(seqlen_k, dtype=torch.float64)[None, :]
    g = torch.as_tensor(gammas, dtype=torch.float64)[:, None, None]
    return torch.where(distance >= 0, g ** distance.clamp_min(0), torch.zeros((), dtype=torch.float64))


def rotary(x, cos, sin, positions, interleaved: bool):
    """x [b, s, h, d] rotated in float64: row i of batch entry b at position positions[b][i],
    the first 2 · cos.shape[1] dims in pairs (2j, 2j + 1) when interleaved, else (j, j + half);
    cos and sin [positions, pairs]."""
    x = torch.as_tensor(np.asarray(x, dtype=np.float64)) if isinstance(x, np.ndarray) else x
    out = x.detach().double().clone()
    cos = torch.as_tensor(np.asarray(cos, dtype=np.float64))
    sin = torch.as_tensor(np.asarray(sin, dtype=np.float64))
    pairs = cos.shape[1]
    first = torch.arange(pairs) * 2 if interleaved else torch.arange(pairs)
    second = first + 1 if interleaved else first + pairs
    for b in range(x.shape[0]):
        for i in range(x.shape[1]):
            c, s = cos[positions[b][i]], sin[positions[b][i]]
            x1, x2 = out[b, i][:, first].clone(), out[b, i][:, second].clone()
            out[b, i][:, first] = x1 * c - x2 * s
            out[b, i][:, second] = x2 * c + x1 * s
    return out
