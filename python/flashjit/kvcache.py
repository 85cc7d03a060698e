"""Decoding and chunked prefill against dense or paged KV caches, FlashAttention's
flash_attn_with_kvcache: appends, rotary embedding, fp8 caches, MLA's latent cache."""

import ctypes
from typing import List, Optional, Tuple

from . import _capi, _custom_ops
from ._alibi import int32_offsets, with_alibi
from ._arrays import Launch, dtype_name
from ._options import (Options, bind_captures, call_options, capture_inputs, element, float32,
                       int32_full, operator_modifiers, operator_options, sequence_names,
                       sequences_of, shape_of)
from ._trace import modifiers

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


# The Sequences fields of a call and the arguments they come from, and the names its errors
# give them (made once: every call passes them).
_ARRAYS = {"seqlens_k": "cache_seqlens", "page_table": "block_table", "k_new": "k",
           "v_new": "v", "rotary_cos": "rotary_cos", "rotary_sin": "rotary_sin",
           "cache_batch_idx": "cache_batch_idx", "cache_leftpad": "cache_leftpad",
           "k_descale": "k_descale", "v_descale": "v_descale", "cu_seqlens_q": "cu_seqlens_q"}
_ERROR_NAMES = sequence_names({**_ARRAYS, "splits": "num_splits"})


def _forward(q, k_cache, v_cache, cache_seqlens, k, v, rotary_cos, rotary_sin, cache_batch_idx,
             cache_leftpad, block_table, k_descale, v_descale, rotary_interleaved: bool,
             num_splits: int, options: Options, cu_seqlens_q=None, max_seqlen_q=None):
    """attention_with_kvcache() with cache_seqlens an array: (o, lse)."""
    layout = "[batch, seqlen, heads, head_dim]"
    if cu_seqlens_q is None:
        b, sq, hq, d = shape_of("q", q, 4, layout)
        o_shape, lse_shape = (b, sq, hq), (b, hq, sq)
    else:  # packed queries: [total_q, heads, head_dim], each sequence's rows by its offsets
        total_q, hq, d = shape_of("q", q, 3, "[total_q, heads, head_dim] with cu_seqlens_q")
        b = shape_of("cu_seqlens_q", cu_seqlens_q, 1, "[batch + 1]")[0] - 1
        if max_seqlen_q is None:
            raise ValueError("'max_seqlen_q' is needed with cu_seqlens_q (the longest "
                             "sequence's queries)")
        sq = int(max_seqlen_q)
        o_shape, lse_shape = (total_q, hq), (hq, total_q)
    _, rows, hk, _ = shape_of("k_cache", k_cache, 4, layout + " or paged")
    if block_table is not None:
        shape_of("block_table", block_table, 2, "[batch, max_pages]")
    seqlen_k = rows if block_table is None else int(block_table.shape[1]) * rows
    a = call_options(options, b, hq, hk, sq, seqlen_k, d)
    value_dim = int(v_cache.shape[-1])
    a.head_dim_v = value_dim if value_dim != d else 0  # MLA: a narrower value cache
    with Launch({"q": q, "k_cache": k_cache, "v_cache": v_cache, "cu_seqlens_q": cu_seqlens_q,
                 "cache_seqlens": cache_seqlens, "block_table": block_table, "k": k, "v": v,
                 "cache_batch_idx": cache_batch_idx, "cache_leftpad": cache_leftpad,
                 "rotary_cos": float32(rotary_cos), "rotary_sin": float32(rotary_sin),
                 "k_descale": float32(k_descale), "v_descale": float32(v_descale),
                 **capture_inputs(options)}) as launch:
        bind_captures(a, launch, options)
        sequences = sequences_of(launch, num_splits, **{
            field: name for field, name in _ARRAYS.items() if launch.inputs[name] is not None})
        sequences.rotary_interleaved = int(bool(rotary_interleaved))
        appends = k is not None or v is not None
        cache = launch.updated if appends else launch.input  # an append writes the cache
        o = launch.output("o", (*o_shape, value_dim), element(q))
        lse = launch.output("lse", lse_shape, "f32")
        _capi.check(_capi.library().flashjit_attention_forward_sequences(
            launch.runtime.handle, ctypes.byref(a), ctypes.byref(sequences),
            _capi.pointer(launch.input("q")), _capi.pointer(cache("k_cache")),
            _capi.pointer(cache("v_cache")), _capi.pointer(o), _capi.pointer(lse), launch.stream),
            _ERROR_NAMES)
        launch.write_back()
        return launch.result("o"), launch.result("lse")


def _with_alibi(options: Options, slopes, q, cache_seqlens, k, cache_leftpad) -> Options:
    """options with alibi_slopes' bias (as they are for None), each sequence's seqlen_k − seqlen_q
    captured: its cached keys after the left pad and the new ones, less the queries."""
    if slopes is None:
        return options
    for name, x in (("cache_seqlens", cache_seqlens), ("k", k), ("cache_leftpad", cache_leftpad)):
        if x is not None:
            dtype_name(name, x)  # an array, before its arithmetic
    seqlens_k = cache_seqlens + (0 if k is None else int(k.shape[1]))
    if cache_leftpad is not None:
        seqlens_k = seqlens_k - cache_leftpad
    batch, seqlen_q, heads_q, _ = shape_of("q", q, 4, "[batch, seqlen, heads, head_dim]")
    return with_alibi(options, slopes, int32_offsets(seqlens_k, seqlen_q), batch, heads_q)


if _custom_ops.AVAILABLE:
    from torch import Tensor

    def _fake(q, k_cache, v_cache, *rest):
        batch, seqlen_q, heads_q, _ = q.shape
        return (q.new_empty((batch, seqlen_q, heads_q, v_cache.shape[-1])),
                q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32))

    def _run(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Tensor,
             k: Optional[Tensor], v: Optional[Tensor], rotary_cos: Optional[Tensor],
             rotary_sin: Optional[Tensor], cache_batch_idx: Optional[Tensor],
             cache_leftpad: Optional[Tensor], block_table: Optional[Tensor],
             k_descale: Optional[Tensor], v_descale: Optional[Tensor], rotary_interleaved: bool,
             num_splits: int, causal: bool, window_left: int, window_right: int, softcap: float,
             scale: Optional[float], alibi_slopes: Optional[Tensor], score_mod: str,
             mask_mod: str, capture_names: str, captures: List[Tensor],
             sinks: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        flags = (causal, window_left, window_right, softcap, scale, False)
        options = _with_alibi(operator_options(flags, score_mod, mask_mod, capture_names,
                                               captures, sinks), alibi_slopes, q, cache_seqlens,
                              k, cache_leftpad)
        return _forward(q, k_cache, v_cache, cache_seqlens, k, v, rotary_cos, rotary_sin,
                        cache_batch_idx, cache_leftpad, block_table, k_descale, v_descale,
                        rotary_interleaved, num_splits, options)

    # Two operators of one function: decoding leaves the cache as it is (torch.compile need not
    # copy it), an append (k and v) writes into it.
    _decode_op = _custom_ops.define("attention_with_kvcache", _fake)(_run)
    _append_op = _custom_ops.define("attention_with_kvcache_append", _fake,
                                    mutates_args=("k_cache", "v_cache"))(_run)


def _batch_of(q, cu_seqlens_q) -> int:
    """The call's batch: q's first extent, or cu_seqlens_q's length less one (packed queries)."""
    if cu_seqlens_q is None:
        return shape_of("q", q, 4, "[batch, seqlen, heads, head_dim]")[0]
    return shape_of("cu_seqlens_q", cu_seqlens_q, 1, "[batch + 1]")[0] - 1


def _refuse_alibi_with_packed_queries(alibi_slopes) -> None:
    if alibi_slopes is not None:
        raise ValueError("'alibi_slopes' with 'cu_seqlens_q' is not supported: pass the bias "
                         "as a score_mod with captures")


def attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, *, k=None, v=None,
                           rotary_cos=None, rotary_sin=None, rotary_interleaved: bool = True,
                           cache_batch_idx=None, cache_leftpad=None, block_table=None,
                           causal: bool = False, window: Tuple[int, int] = (-1, -1),
                           softcap: float = 0.0, scale: Optional[float] = None, num_splits: int = 0,
                           return_lse: bool = False, score_mod: str = "", mask_mod: str = "",
                           captures: Optional[dict] = None, k_descale=None, v_descale=None,
                           alibi_slopes=None, cu_seqlens_q=None, max_seqlen_q=None,
                           sinks=None):
    """Decoding and chunked prefill against a KV cache, FlashAttention's flash_attn_with_kvcache:
    q is [batch, seqlen_q, heads_q, head_dim]; the cache is dense, [batch, seqlen_cache,
    heads_kv, head_dim], or paged, [num_pages, page_size, heads_kv, head_dim] (any page_size,
    1 included) with block_table int32 [batch, max_pages] naming each sequence's pages;
    cache_seqlens (int32 [batch], or one int for all) the keys each sequence has cached.

    k and v ([batch, seqlen_new, heads_kv, head_dim], the cache's dtype: q's, or e4m3 codes in an
    fp8 cache's scale): new keys and values, written into k_cache and v_cache in place at positions
    cache_seqlens[b] onward before the attention, which then sees cache_seqlens[b] + seqlen_new
    keys (cache_seqlens itself is not changed: advance it yourself). rotary_cos and rotary_sin
    ([positions, rotary_dim / 2], any float dtype, covering the cache's positions): rotary
    embedding of q and the new keys on the way in, new key i at position cache_seqlens[b] + i,
    query i there too when causal or windowed (also past the new keys: the tables must reach it),
    else every query at cache_seqlens[b]; rotary_interleaved pairs dims 2i and 2i + 1 (GPT-J,
    FlashAttention's default), False pairs i and i + rotary_dim / 2 (GPT-NeoX, Llama).

    cache_batch_idx (int32 [batch]): sequence b's row of a dense cache, which may then have any
    number of rows, or of block_table ([cache_batch, max_pages]) with a paged one; rows must
    differ when appending. cache_leftpad (int32 [batch]): where sequence b's keys start in its
    row (its pages); cache_seqlens counts from the row's start, the padding included (rotary
    positions too).

    An fp8 cache: k_cache and v_cache of e4m3 codes (uint8 arrays or tensors, or
    torch.float8_e4m3fn) with q fp16 or bf16; k_descale and v_descale (any float dtype, [1],
    [heads_kv] or [batch, heads_kv], FlashAttention-3's shape; each optional, 1) take the stored
    values to the true ones, applied in float32 to the scores and the output. Head dims must be
    multiples of 16; an append gives k and v as e4m3 codes in the same scale (FlashAttention 3's
    rule), copied in (rotated in float32 and rounded back to e4m3 with rotary).

    head_dim goes up to 576 here, with v_cache narrower (MLA's absorbed decoding: 576 and 512).
    A v_cache that is k_cache's first columns in the same memory (kv_cache[..., :512] of a CUDA
    tensor) is seen as such and read once with the keys. alibi_slopes as in attention(), each
    sequence's seqlen_k its cached keys after the left pad and the new ones.
    cu_seqlens_q (int32 [batch + 1]) with max_seqlen_q: packed queries, FlashAttention 3's
    varlen q: q is [total_q, heads_q, head_dim], sequence b's rows cu_seqlens_q[b] to
    cu_seqlens_q[b + 1] (each its own count, rotated at its own positions with an append); o is
    then [total_q, heads_q, head_dim_v] and the LSE [heads_q, total_q]. Not with alibi_slopes;
    such calls run outside the custom operators (a graph break under torch.compile).

    num_splits: split-KV blocks per query block (0 chooses, 1 to 64 forces), merged exactly.
    score_mod, mask_mod, captures and sinks as in attention() (the sinks counted once, after the
    merge), b the sequence's index and q_idx, kv_idx positions within it (kv_idx from the first
    key after a left pad). Forward only.
    Returns o like q (and the float32 LSE [batch, heads_q, seqlen_q] with return_lse). Bad input
    raises ValueError naming the argument (this call's names: cache_seqlens, block_table, k,
    window[0], ...) before anything is written. With PyTorch 2.4 or
    later, torch tensors go through the custom operator flashjit::attention_with_kvcache
    (modifiers and captures included; with an append, its twin
    flashjit::attention_with_kvcache_append, which writes k_cache and v_cache), traced whole by
    torch.compile."""
    options = Options(causal, tuple(window), softcap, scale, False,
                      *modifiers(score_mod, mask_mod, captures, q), sinks=float32(sinks))
    if isinstance(cache_seqlens, int):
        cache_seqlens = int32_full(q, _batch_of(q, cu_seqlens_q), cache_seqlens)
    arrays = (cache_seqlens, k, v, rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad,
              block_table, k_descale, v_descale)
    if cu_seqlens_q is not None:
        _refuse_alibi_with_packed_queries(alibi_slopes)
        o, lse = _forward(q, k_cache, v_cache, *arrays, rotary_interleaved, num_splits, options,
                          cu_seqlens_q, max_seqlen_q)
    elif _custom_ops.takes(q, k_cache, v_cache, *arrays, alibi_slopes, options.sinks,
                           *[x for _, x in options.captures]):
        op = _append_op if k is not None or v is not None else _decode_op
        o, lse = op(q, k_cache, v_cache, *arrays, bool(rotary_interleaved), int(num_splits),
                    *options.flags()[:5], alibi_slopes, *operator_modifiers(options),
                    options.sinks)
    else:
        options = _with_alibi(options, alibi_slopes, q, cache_seqlens, k, cache_leftpad)
        o, lse = _forward(q, k_cache, v_cache, *arrays, rotary_interleaved, num_splits, options)
    return (o, lse) if return_lse else o
