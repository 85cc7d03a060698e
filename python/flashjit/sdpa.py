"""PyTorch's scaled_dot_product_attention under its own name, arguments and [batch, heads,
seqlen, head_dim] layout, so SDPA code switches to flashjit by its import:

    from flashjit import scaled_dot_product_attention

flashjit's own calls take FlashAttention's [batch, seqlen, heads, head_dim]; this one swaps the
two middle axes on the way in and out (a copy each way, as flashjit reads contiguous rows)."""

from typing import Optional

import numpy as np

from .attention import attention


def _swap_middle(x):
    """x [a, b, c, d] as [a, c, b, d], contiguous (numpy or torch)."""
    if hasattr(x, "transpose") and hasattr(x, "contiguous"):  # torch
        return x.transpose(1, 2).contiguous()
    return np.ascontiguousarray(np.swapaxes(x, 1, 2))


def _mask_index(mask, batch: int, heads: int) -> str:
    """The index expression of `mask` (broadcastable to [batch, heads, seqlen_q, seqlen_k], rank
    2 to 4) at the modifiers' b, h, q_idx and kv_idx: 0 along an axis of size 1."""
    shape = tuple(mask.shape)
    if not 2 <= len(shape) <= 4:
        raise ValueError(f"'attn_mask' has shape {shape}: it must broadcast to [batch, heads, "
                         f"seqlen_q, seqlen_k] with rank 2 to 4")
    full = (1,) * (4 - len(shape)) + shape
    names = ("b", "h", "q_idx", "kv_idx")
    index = ""
    for axis, (size, name) in enumerate(zip(full, names)):
        if axis >= 4 - len(shape):
            index += f"[{name if size != 1 else 0}]"
    for size, wanted, what in zip(full[:2], (batch, heads), ("batch", "heads")):
        if size not in (1, wanted):
            raise ValueError(f"'attn_mask' has shape {shape}: its {what} axis is {size}, not 1 "
                             f"or {wanted}")
    return index


def _is_bool(mask) -> bool:
    return str(mask.dtype) in ("torch.bool", "bool")


def _as_int32(mask):
    if hasattr(mask, "to"):  # torch
        import torch  # torch is there: mask is a tensor
        return mask.to(torch.int32)
    return mask.astype(np.int32)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False):
    """torch.nn.functional.scaled_dot_product_attention on flashjit: query [batch, heads_q,
    seqlen_q, head_dim], key and value [batch, heads_kv, seqlen_k, head_dim(_v)]; returns
    [batch, heads_q, seqlen_q, head_dim_v]. As in PyTorch: `is_causal` lets query i see keys
    j <= i (aligned top-left; flashjit's own `causal` aligns bottom-right, the same when
    seqlen_q == seqlen_k); `attn_mask` is boolean (True: takes part) or added to the scaled
    scores (its gradient returned when it requires grad), broadcastable to [batch, heads_q,
    seqlen_q, seqlen_k]; `scale` defaults to 1/sqrt(head_dim); heads_q != heads_kv needs
    `enable_gqa`. `dropout_p` drops attention weights as PyTorch does (kept ones scaled by
    1 / (1 − p)), with flashjit's own mask (attention()'s dropout, its seed drawn from torch's
    default generator: the same p, not PyTorch's bits). A query row that sees no key gives zeros
    where PyTorch gives NaN. Gradients flow as in attention()."""
    if is_causal and attn_mask is not None:
        raise ValueError("'attn_mask' and 'is_causal' are exclusive (as in PyTorch)")
    if len(query.shape) != 4 or len(key.shape) != 4:
        raise ValueError(f"'query' and 'key' must be [batch, heads, seqlen, head_dim], not "
                         f"{tuple(query.shape)} and {tuple(key.shape)}")
    batch, heads_q, seqlen_q, _ = query.shape
    heads_kv, seqlen_k = key.shape[1], key.shape[2]
    if heads_q != heads_kv and not enable_gqa:
        raise ValueError(f"'query' has {heads_q} heads and 'key' {heads_kv}: grouped-query "
                         f"attention needs enable_gqa=True (as in PyTorch)")
    score_mod, mask_mod, captures = "", "", None
    if is_causal and seqlen_q != seqlen_k:
        mask_mod = "kv_idx <= q_idx"  # top-left, as PyTorch's is_causal
    if attn_mask is not None:
        if tuple(attn_mask.shape[-2:]) not in ((seqlen_q, seqlen_k), (1, seqlen_k),
                                               (seqlen_q, 1), (1, 1)):
            raise ValueError(f"'attn_mask' has shape {tuple(attn_mask.shape)}: its last two "
                             f"axes must broadcast to (seqlen_q, seqlen_k) = ({seqlen_q}, "
                             f"{seqlen_k})")
        index = _mask_index(attn_mask, batch, heads_q)
        if _is_bool(attn_mask):
            mask_mod, captures = f"attn_mask{index} != 0", {"attn_mask": _as_int32(attn_mask)}
        else:
            score_mod, captures = f"score + attn_mask{index}", {"attn_mask": attn_mask}
    o = attention(_swap_middle(query), _swap_middle(key), _swap_middle(value),
                  causal=is_causal and seqlen_q == seqlen_k, scale=scale, score_mod=score_mod,
                  mask_mod=mask_mod, captures=captures, dropout_p=dropout_p)
    return _swap_middle(o)
