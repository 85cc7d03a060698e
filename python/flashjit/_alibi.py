"""ALiBi, FlashAttention's alibi_slopes, as a score modifier: the bias
−slope · |i + seqlen_k − seqlen_q − j| added to the scaled (and soft-capped) score of query i
and key j, with the slopes and each sequence's seqlen_k − seqlen_q read from captures."""

import dataclasses

import numpy as np

from ._arrays import dtype_name, is_torch
from ._options import Options, float32

_NAMES = ("alibi_slopes", "alibi_offsets")


def with_alibi(options: Options, slopes, offsets, batch: int, heads_q: int) -> Options:
    """`options` with ALiBi's bias as their score modifier (unchanged when slopes is None).
    slopes: [heads_q] or [batch, heads_q], any float dtype (read as float32). offsets: each
    sequence's diagonal offset seqlen_k − seqlen_q, an int32 array [batch] (numpy or torch like
    the call's arrays). Both are captures, so the expression's text, and with it the kernel, is
    the same for every call: no sizes or slopes are compiled in."""
    if slopes is None:
        return options
    if options.score_mod:
        raise ValueError("'alibi_slopes' and 'score_mod' cannot both be given: add the bias "
                         "in the score_mod")
    taken = [name for name, _ in options.captures if name in _NAMES]
    if taken:
        raise ValueError(f"'captures': the name {taken[0]!r} is taken by 'alibi_slopes'")
    dtype_name("alibi_slopes", slopes)
    shape = tuple(int(s) for s in slopes.shape)
    if shape not in ((heads_q,), (batch, heads_q)):
        raise ValueError(f"'alibi_slopes' must be [heads_q] = [{heads_q}] or [batch, heads_q] = "
                         f"[{batch}, {heads_q}], not shape {shape}")
    if is_torch(slopes):
        # FlashAttention's slopes get no gradient; nor do these. One per sequence and head.
        slopes = float32(slopes.detach()).expand(batch, heads_q).contiguous()
    else:
        slopes = np.ascontiguousarray(np.broadcast_to(float32(slopes), (batch, heads_q)))
    captures = options.captures + (("alibi_slopes", slopes), ("alibi_offsets", offsets))
    score_mod = ("score - alibi_slopes[b][h] * fabsf(float(q_idx + alibi_offsets[b] - kv_idx))")
    return dataclasses.replace(options, score_mod=score_mod, captures=captures)


def int32_offsets(seqlens_k, seqlens_q):
    """seqlens_k − seqlens_q per sequence as int32, numpy or torch like seqlens_k."""
    difference = seqlens_k - seqlens_q
    if is_torch(difference):
        import torch
        return difference.to(torch.int32)
    return np.asarray(difference, dtype=np.int32)
