"""FlashAttention's packed-input calls: q, k and v (or k and v) stacked in one array, as a fused
projection writes them. Each is the unpacked call on views of its slices, so gradients reach
the packed array through them."""

from typing import Tuple

from ._arrays import dtype_name
from .attention import attention
from .varlen import attention_varlen


def _slices(name: str, packed, axis: int, count: int, layout: str) -> Tuple:
    """The `count` arrays stacked along `axis` of `packed` (views)."""
    dtype_name(name, packed)
    if packed.ndim <= axis or packed.shape[axis] != count:
        raise ValueError(f"'{name}' must be {layout}, not shape {tuple(packed.shape)}")
    index = (slice(None),) * axis
    return tuple(packed[index + (i,)] for i in range(count))


def attention_qkvpacked(qkv, **options):
    """attention() over q, k and v stacked in qkv, [batch, seqlen, 3, heads, head_dim]
    (FlashAttention's flash_attn_qkvpacked_func: heads_q = heads_kv); every keyword of
    attention() is taken. A torch qkv that requires grad gets its gradient."""
    q, k, v = _slices("qkv", qkv, 2, 3, "[batch, seqlen, 3, heads, head_dim]")
    return attention(q, k, v, **options)


def attention_kvpacked(q, kv, **options):
    """attention() with k and v stacked in kv, [batch, seqlen_k, 2, heads_kv, head_dim]
    (FlashAttention's flash_attn_kvpacked_func); every keyword of attention() is taken."""
    k, v = _slices("kv", kv, 2, 2, "[batch, seqlen_k, 2, heads_kv, head_dim]")
    return attention(q, k, v, **options)


def attention_varlen_qkvpacked(qkv, cu_seqlens, max_seqlen: int, **options):
    """attention_varlen() over q, k and v stacked in qkv, [total, 3, heads, head_dim], one
    cu_seqlens and max_seqlen for queries and keys (FlashAttention's
    flash_attn_varlen_qkvpacked_func); every keyword of attention_varlen() is taken."""
    q, k, v = _slices("qkv", qkv, 1, 3, "[total, 3, heads, head_dim]")
    return attention_varlen(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, **options)


def attention_varlen_kvpacked(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int,
                              max_seqlen_k: int, **options):
    """attention_varlen() with k and v stacked in kv, [total_k, 2, heads_kv, head_dim]
    (FlashAttention's flash_attn_varlen_kvpacked_func); every keyword of attention_varlen() is
    taken."""
    k, v = _slices("kv", kv, 1, 2, "[total_k, 2, heads_kv, head_dim]")
    return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            **options)
