"""FlashAttention 2's Python calls under their own names and argument lists, so that code
written for `flash_attn.flash_attn_interface` runs on flashjit by changing its import:

    from flashjit.flash_attn_interface import flash_attn_func, flash_attn_with_kvcache

Each call is the flashjit call it names (softmax_scale is `scale`, window_size `window`).
dropout_p is attention()'s (and attention_varlen()'s) dropout, its seed drawn from torch's
default generator on each call, so torch.manual_seed makes a run repeat (not over a paged
cache: block_table with dropout_p is refused by name). With
return_attn_probs the calls return (out, softmax_lse, None): flashjit never materializes the
probabilities or the dropout mask. A query row that sees no key gets the LSE FlashAttention gives it,
+inf (flashjit's own calls say -inf: no key, a sum of 0), and an output row of zeros.

Head dims that are not a multiple of 8 (12, 20, ...) are padded with zeros to the next one and
the output sliced back, as FlashAttention's wrapper does (the softmax scale stays 1/sqrt of the
caller's head dim; gradients flow through the padding). flash_attn_with_kvcache cannot pad
per call, as it writes into the cache: it asks for a cache allocated padded."""

from typing import Tuple

import numpy as np

from ._options import element, shape_of
from .attention import attention
from .kvcache import attention_with_kvcache
from .packed import (attention_kvpacked, attention_qkvpacked, attention_varlen_kvpacked,
                     attention_varlen_qkvpacked)
from .varlen import attention_varlen


def _options(dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
             deterministic) -> dict:
    """attention()'s (and attention_varlen()'s) keywords for FlashAttention's arguments."""
    return dict(scale=softmax_scale, causal=causal, window=tuple(window_size), softcap=softcap,
                alibi_slopes=alibi_slopes, deterministic=deterministic, return_lse=True,
                dropout_p=dropout_p)


def _flash_attn_lse(lse):
    """`lse` as FlashAttention returns it: +inf, not -inf, for a row that sees no key (a new
    array: the one autograd saved for the backward keeps flashjit's -inf)."""
    if hasattr(lse, "masked_fill"):  # torch
        return lse.masked_fill(lse == float("-inf"), float("inf"))
    return np.where(lse == -np.inf, np.inf, lse).astype(lse.dtype)


def _result(o_lse, return_attn_probs: bool, value_dim=None):
    o, lse = o_lse
    if value_dim is not None:
        o = o[..., :value_dim]  # the padding's zero columns dropped
    return (o, _flash_attn_lse(lse), None) if return_attn_probs else o


def _pad_last(x, pad: int):
    """`x` with `pad` zero columns added to its last dimension (torch: differentiable)."""
    if hasattr(x, "new_zeros"):  # torch
        import torch.nn.functional as F  # torch is there: x is a tensor
        return F.pad(x, (0, pad))
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])


def _padded(arrays, softmax_scale, value_dim=None):
    """`arrays` (q, k, v or a packed form; head dim last) padded to a multiple of 8 where the
    first one's head dim is not, the scale to use, and the output's head dim to slice back to
    (None: nothing padded). The padding's zeros add nothing to q·k and give zero columns of o."""
    head_dim = arrays[0].shape[-1]
    value_dim = head_dim if value_dim is None else value_dim
    if head_dim % 8 == 0 and value_dim % 8 == 0:
        return arrays, softmax_scale, None
    padded = [_pad_last(x, (-x.shape[-1]) % 8) for x in arrays]
    scale = softmax_scale if softmax_scale is not None else head_dim ** -0.5
    return padded, scale, value_dim


def _sinks(learnable_sink, q) -> dict:
    """attention()'s `sinks` for FlashAttention's learnable_sink ([heads_q], or None), checked
    under FlashAttention's name."""
    if learnable_sink is None:
        return {}
    heads_q = q.shape[-2]
    if not hasattr(learnable_sink, "shape") or tuple(learnable_sink.shape) != (heads_q,):
        raise ValueError(f"'learnable_sink' must be an array of one logit per query head, "
                         f"[{heads_q}], not {getattr(learnable_sink, 'shape', learnable_sink)!r}")
    return {"sinks": learnable_sink}


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size: Tuple[int, int] = (-1, -1), softcap=0.0, alibi_slopes=None,
                    deterministic=False, return_attn_probs=False, learnable_sink=None,
                    q_descale=None, k_descale=None, v_descale=None):
    """flashjit.attention(q, k, v, ...) with FlashAttention's arguments; `learnable_sink`
    (FlashAttention 3's name: gpt-oss's per-head sink logits, [heads_q]) is attention()'s
    `sinks`, with its gradient; `q_descale`, `k_descale`, `v_descale` (FlashAttention 3's) the
    fp8 forward's factors, for float8_e4m3fn q, k and v (o bfloat16)."""
    descales = {"q_descale": q_descale, "k_descale": k_descale, "v_descale": v_descale}
    if any(x is not None for x in descales.values()) or element(q) == "e4m3":
        # (fp8 head dims are multiples of 16: nothing to pad)
        return _result(attention(q, k, v, **_options(dropout_p, softmax_scale, causal,
                                                     window_size, softcap, alibi_slopes,
                                                     deterministic),
                                 **_sinks(learnable_sink, q), **descales),
                       return_attn_probs, v.shape[-1])
    (q, k, v), scale, value_dim = _padded((q, k, v), softmax_scale, v.shape[-1])
    return _result(attention(q, k, v, **_options(dropout_p, scale, causal, window_size,
                                                 softcap, alibi_slopes, deterministic),
                             **_sinks(learnable_sink, q)),
                   return_attn_probs, value_dim)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size: Tuple[int, int] = (-1, -1), softcap=0.0,
                              alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flashjit.attention_qkvpacked(qkv, ...) with FlashAttention's arguments."""
    (qkv,), scale, value_dim = _padded((qkv,), softmax_scale)
    return _result(attention_qkvpacked(qkv, **_options(
        dropout_p, scale, causal, window_size, softcap, alibi_slopes, deterministic)),
        return_attn_probs, value_dim)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size: Tuple[int, int] = (-1, -1), softcap=0.0,
                             alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flashjit.attention_kvpacked(q, kv, ...) with FlashAttention's arguments."""
    (q, kv), scale, value_dim = _padded((q, kv), softmax_scale)
    return _result(attention_kvpacked(q, kv, **_options(
        dropout_p, scale, causal, window_size, softcap, alibi_slopes, deterministic)),
        return_attn_probs, value_dim)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size: Tuple[int, int] = (-1, -1), softcap=0.0,
                           alibi_slopes=None, deterministic=False, return_attn_probs=False,
                           block_table=None, learnable_sink=None):
    """flashjit.attention_varlen(q, k, v, ...) with FlashAttention's arguments (block_table:
    k and v a paged cache; learnable_sink: attention_varlen's sinks, as in flash_attn_func)."""
    (q, k, v), scale, value_dim = _padded((q, k, v), softmax_scale, v.shape[-1])
    options = _options(dropout_p, scale, causal, window_size, softcap, alibi_slopes,
                       deterministic)
    return _result(attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, block_table=block_table, **options,
                                    **_sinks(learnable_sink, q)),
                   return_attn_probs, value_dim)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0,
                                     softmax_scale=None, causal=False,
                                     window_size: Tuple[int, int] = (-1, -1), softcap=0.0,
                                     alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """flashjit.attention_varlen_qkvpacked(qkv, ...) with FlashAttention's arguments."""
    (qkv,), scale, value_dim = _padded((qkv,), softmax_scale)
    return _result(attention_varlen_qkvpacked(qkv, cu_seqlens, max_seqlen, **_options(
        dropout_p, scale, causal, window_size, softcap, alibi_slopes, deterministic)),
        return_attn_probs, value_dim)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, dropout_p=0.0, softmax_scale=None,
                                    causal=False, window_size: Tuple[int, int] = (-1, -1),
                                    softcap=0.0, alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False):
    """flashjit.attention_varlen_kvpacked(q, kv, ...) with FlashAttention's arguments."""
    (q, kv), scale, value_dim = _padded((q, kv), softmax_scale)
    return _result(attention_varlen_kvpacked(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                             max_seqlen_k, **_options(
                                                 dropout_p, scale, causal, window_size,
                                                 softcap, alibi_slopes, deterministic)),
                   return_attn_probs, value_dim)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size: Tuple[int, int] = (-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False, cu_seqlens_q=None, max_seqlen_q=None):
    """flashjit.attention_with_kvcache(...) with FlashAttention's arguments: cache_seqlens
    None means every sequence has the whole dense cache (a paged cache needs them);
    cu_seqlens_q and max_seqlen_q (FlashAttention 3's) pack the queries."""
    head_dim = q.shape[-1]
    if head_dim % 8 != 0:
        raise ValueError(f"'q' has head dim {head_dim}, not a multiple of 8: "
                         f"flash_attn_with_kvcache writes into the cache, so it cannot pad per "
                         f"call; allocate k_cache and "
                         f"v_cache with head dim {head_dim + (-head_dim) % 8} (zeros past "
                         f"{head_dim}), pad q, k and v alike, pass softmax_scale="
                         f"{head_dim ** -0.5:.6g} and slice the output")
    if cache_seqlens is None:
        if block_table is not None:
            raise ValueError("'cache_seqlens' is needed with block_table (each sequence's "
                             "cached key count)")
        cache_seqlens = shape_of("k_cache", k_cache, 4, "[batch, seqlen_cache, heads_kv, "
                                 "head_dim]")[1]
    o, lse = attention_with_kvcache(
        q, k_cache, v_cache, cache_seqlens, k=k, v=v, rotary_cos=rotary_cos,
        rotary_sin=rotary_sin, rotary_interleaved=rotary_interleaved,
        cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad, block_table=block_table,
        causal=causal, window=tuple(window_size), softcap=softcap, scale=softmax_scale,
        num_splits=num_splits, alibi_slopes=alibi_slopes, return_lse=True,
        cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q)
    return (o, _flash_attn_lse(lse)) if return_softmax_lse else o
