"""Attention over packed batches of variable lengths [total, heads, head_dim] with cu_seqlens,
FlashAttention's flash_attn_varlen_func, with its backward; and packed queries over a paged KV
cache (block_table), forward only. LSEs are natural-log, [heads, total]."""

import ctypes
from typing import List, Optional, Tuple

from . import _capi, _custom_ops
from ._alibi import int32_offsets, with_alibi
from ._arrays import Launch
from ._options import (Options, bind_captures, call_options, capture_gradients, capture_inputs,
                       drawn_dropout_seed, element, float32, operator_modifiers, operator_options,
                       sequence_names, sequences_of, shape_of, wants_grad)
from ._trace import modifiers

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _varlen_options(q, k, v, cu_seqlens_q, max_seqlen_q, max_seqlen_k, options, paged=False):
    layout = "[total, heads, head_dim]"
    _, hq, d = shape_of("q", q, 3, layout)
    if paged:
        cache = "[num_pages, page_size, heads_kv, head_dim] with block_table"
        hk = shape_of("k", k, 4, cache)[2]
        value_dim = shape_of("v", v, 4, cache)[3]
    else:
        _, hk, _ = shape_of("k", k, 3, layout)
        value_dim = shape_of("v", v, 3, layout)[2]
    shape_of("cu_seqlens_q", cu_seqlens_q, 1, "[batch + 1]")
    a = call_options(options, cu_seqlens_q.shape[0] - 1, hq, hk, max_seqlen_q, max_seqlen_k, d)
    a.head_dim_v = value_dim if value_dim != d else 0  # MLA: v narrower than q and k
    return a


def _used_counts(used):
    """The launch inputs and Sequences fields of (seqused_q, seqused_k), each possibly None:
    seqused_k is the library's seqlens_k (how many of a sequence's packed keys are used)."""
    inputs, fields = {}, {}
    for name, field, counts in (("seqused_q", "seqused_q", used[0]),
                                ("seqused_k", "seqlens_k", used[1])):
        if counts is not None:
            inputs[name] = counts
            fields[field] = name
    return inputs, fields


def _lengths(name: str, cu_seqlens, used):
    """Each sequence's rows: `used` (seqused_q or seqused_k) when given, else the spans of
    cu_seqlens (checked to be an array [batch + 1], named `name`)."""
    if used is not None:
        return used
    shape_of(name, cu_seqlens, 1, "[batch + 1]")
    return cu_seqlens[1:] - cu_seqlens[:-1]


def _key_counts(cu_seqlens_k, seqused_k):
    """Each sequence's key count over a paged cache: seqused_k, else cu_seqlens_k's spans."""
    if cu_seqlens_k is None and seqused_k is None:
        raise ValueError("'cu_seqlens_k': with block_table, cu_seqlens_k or seqused_k gives "
                         "each sequence's key count; both are None")
    return _lengths("cu_seqlens_k", cu_seqlens_k, seqused_k)


def _varlen_forward(q, k, v, cu_q, cu_k, max_q, max_k, options, used=(None, None),
                    block_table=None):
    paged = block_table is not None
    a = _varlen_options(q, k, v, cu_q, max_q, max_k, options, paged)
    if paged:  # the keys are in pages: their counts, not their offsets
        shape_of("block_table", block_table, 2, "[batch, max_pages]")
        used = (used[0], _key_counts(cu_k, used[1]))
        keys, key_fields = {"block_table": block_table}, {"page_table": "block_table"}
    else:
        keys, key_fields = {"cu_seqlens_k": cu_k}, {"cu_seqlens_k": "cu_seqlens_k"}
    used_inputs, used_fields = _used_counts(used)
    with Launch({"q": q, "k": k, "v": v, "cu_seqlens_q": cu_q, **keys, **used_inputs,
                 **capture_inputs(options)}) as launch:
        bind_captures(a, launch, options)
        fields = {"cu_seqlens_q": "cu_seqlens_q", **key_fields, **used_fields}
        sequences = sequences_of(launch, **fields)
        o = launch.output("o", (*q.shape[:2], v.shape[-1]), element(q))
        lse = launch.output("lse", (a.heads_q, q.shape[0]), "f32")
        _capi.check(_capi.library().flashjit_attention_forward_sequences(
            launch.runtime.handle, ctypes.byref(a), ctypes.byref(sequences),
            *[_capi.pointer(launch.input(n)) for n in ("q", "k", "v")], _capi.pointer(o),
            _capi.pointer(lse), launch.stream), lambda: sequence_names(fields))
        return launch.result("o"), launch.result("lse")


def _varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k, max_q, max_k, options, used=(None, None),
                     capture_grads=None, sinks_grad=None):
    a = _varlen_options(q, k, v, cu_q, max_q, max_k, options)
    used_inputs, used_fields = _used_counts(used)
    with Launch({"dout": dout, "q": q, "k": k, "v": v, "o": o, "lse": lse, "cu_seqlens_q": cu_q,
                 "cu_seqlens_k": cu_k, **used_inputs,
                 **capture_inputs(options, capture_grads, sinks_grad)}) as launch:
        bind_captures(a, launch, options, capture_grads, sinks_grad)
        fields = {"cu_seqlens_q": "cu_seqlens_q", "cu_seqlens_k": "cu_seqlens_k", **used_fields}
        sequences = sequences_of(launch, **fields)
        dq = launch.output("dq", q.shape, element(q))
        dk = launch.output("dk", k.shape, element(q))
        dv = launch.output("dv", v.shape, element(q))
        _capi.check(_capi.library().flashjit_attention_backward_sequences(
            launch.runtime.handle, ctypes.byref(a), ctypes.byref(sequences),
            *[_capi.pointer(launch.input(n)) for n in ("q", "k", "v", "o", "lse", "dout")],
            _capi.pointer(dq), _capi.pointer(dk), _capi.pointer(dv), launch.stream),
            lambda: sequence_names(fields))
        launch.write_back()  # the captures' and the sinks' gradients, on the emulator
        return launch.result("dq"), launch.result("dk"), launch.result("dv")


if torch is not None:

    class _VarlenFunction(torch.autograd.Function):
        """attention_varlen() with its gradients; the sinks (options.sinks, or None) and the
        captures' tensors come last, so that those requiring grad get theirs."""

        @staticmethod
        def forward(ctx, q, k, v, cu_q, cu_k, max_q, max_k, options, used, sinks,
                    *capture_tensors):
            o, lse = _varlen_forward(q, k, v, cu_q, cu_k, max_q, max_k, options, used)
            ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
            ctx.extra = (max_q, max_k, options, used)
            ctx.mark_non_differentiable(lse)
            return o, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
            max_q, max_k, options, used = ctx.extra
            wanted = ctx.needs_input_grad[10:]
            grads = capture_gradients([x for _, x in options.captures], wanted)
            named = {name: g for (name, _), g in zip(options.captures, grads) if g is not None}
            sinks_grad = torch.empty_like(options.sinks) if ctx.needs_input_grad[9] else None
            dq, dk, dv = _varlen_backward(dout.contiguous(), q, k, v, o, lse, cu_q, cu_k, max_q,
                                          max_k, options, used, named, sinks_grad)
            return (dq, dk, dv, *([None] * 6), sinks_grad,
                    *[None if g is None else g.to(x.dtype)
                      for g, (_, x) in zip(grads, options.captures)])


if _custom_ops.AVAILABLE:
    from torch import Tensor

    def _fake_forward(q, k, v, *rest):
        return (q.new_empty((q.shape[0], q.shape[1], v.shape[-1])),
                q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32))

    def _fake_backward(dout, q, k, v, *rest):
        return q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape)

    @_custom_ops.define("attention_varlen_backward", _fake_backward,
                        mutates_args=("capture_grads", "sinks_grad"))
    def _backward_op(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                     cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
                     max_seqlen_k: int, seqused_q: Optional[Tensor], seqused_k: Optional[Tensor],
                     alibi_slopes: Optional[Tensor], causal: bool, window_left: int,
                     window_right: int, softcap: float, scale: Optional[float],
                     deterministic: bool, score_mod: str, mask_mod: str, capture_names: str,
                     captures: List[Tensor], sinks: Optional[Tensor], dropout_p: float,
                     dropout_seed: int, dropout_offset: int, wanted: List[bool],
                     capture_grads: List[Tensor],
                     sinks_grad: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
        """The backward (with the forward's dropout p, seed and offset); the gradients of the
        captures whose `wanted` is true are added into capture_grads (one each, in order;
        float32, zeroed by the caller), the sinks' written into sinks_grad where given."""
        flags = (causal, window_left, window_right, softcap, scale, deterministic)
        options = _with_alibi(operator_options(flags, score_mod, mask_mod, capture_names,
                                               captures, sinks,
                                               (dropout_p, dropout_seed, dropout_offset)),
                              alibi_slopes, q, cu_seqlens_q, cu_seqlens_k,
                              (seqused_q, seqused_k))
        names = [name for (name, _), w in zip(options.captures, wanted) if w]
        return _varlen_backward(dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                max_seqlen_k, options, (seqused_q, seqused_k),
                                dict(zip(names, capture_grads)), sinks_grad)

    _CAPTURES = 16  # the captures' place among the forward operator's arguments after q, k, v

    def _save(ctx, inputs, output):
        q, k, v, *rest = inputs
        ctx.save_for_backward(q, k, v, *output)
        # The index arrays, the lengths, the slopes, the flags, the modifiers, the sinks and the
        # dropout; not the block table, before the dropout (attention_varlen refuses gradients
        # over a paged cache).
        ctx.rest = (*rest[:-4], *rest[-3:])
        ctx.wanted = [x.requires_grad for x in rest[_CAPTURES]]
        sinks = rest[_CAPTURES + 1]
        ctx.wants_sinks_grad = sinks is not None and sinks.requires_grad
        ctx.mark_non_differentiable(output[1])

    def _differentiate(ctx, dout, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        captures, sinks = ctx.rest[_CAPTURES], ctx.rest[_CAPTURES + 1]
        grads = capture_gradients(captures, ctx.wanted)
        sinks_grad = torch.empty_like(sinks) if ctx.wants_sinks_grad else None
        dq, dk, dv = _backward_op(dout.contiguous(), q, k, v, o, lse, *ctx.rest, ctx.wanted,
                                  [g for g in grads if g is not None], sinks_grad)
        capture_grads = [None if g is None else g.to(x.dtype) for g, x in zip(grads, captures)]
        return (dq, dk, dv, *([None] * _CAPTURES), capture_grads, sinks_grad, None, None, None,
                None)

    @_custom_ops.define("attention_varlen_forward", _fake_forward, backward=_differentiate,
                        setup_context=_save)
    def _forward_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                    cu_seqlens_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
                    seqused_q: Optional[Tensor], seqused_k: Optional[Tensor],
                    alibi_slopes: Optional[Tensor], causal: bool, window_left: int,
                    window_right: int, softcap: float, scale: Optional[float], deterministic: bool,
                    score_mod: str, mask_mod: str, capture_names: str, captures: List[Tensor],
                    sinks: Optional[Tensor], block_table: Optional[Tensor], dropout_p: float,
                    dropout_seed: int, dropout_offset: int) -> Tuple[Tensor, Tensor]:
        """The forward; score_mod and mask_mod (texts of the modifier language) read the
        captures, named in capture_names (comma-separated); the sinks (float32 [heads_q], or
        None); the dropout's p, seed and offset."""
        flags = (causal, window_left, window_right, softcap, scale, deterministic)
        options = _with_alibi(operator_options(flags, score_mod, mask_mod, capture_names,
                                               captures, sinks,
                                               (dropout_p, dropout_seed, dropout_offset)),
                              alibi_slopes, q, cu_seqlens_q, cu_seqlens_k,
                              (seqused_q, seqused_k))
        return _varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               options, (seqused_q, seqused_k), block_table)


def _with_alibi(options: Options, slopes, q, cu_seqlens_q, cu_seqlens_k, used) -> Options:
    """options with alibi_slopes' bias (as they are for None), each sequence's diagonal
    offset captured."""
    if slopes is None:
        return options
    offsets = int32_offsets(_lengths("cu_seqlens_k", cu_seqlens_k, used[1]),
                            _lengths("cu_seqlens_q", cu_seqlens_q, used[0]))
    heads_q = shape_of("q", q, 3, "[total, heads, head_dim]")[1]
    return with_alibi(options, slopes, offsets, int(cu_seqlens_q.shape[0]) - 1, heads_q)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int,
                     *, causal: bool = False, window: Tuple[int, int] = (-1, -1),
                     softcap: float = 0.0, scale: Optional[float] = None,
                     deterministic: bool = False, return_lse: bool = False, score_mod: str = "",
                     mask_mod: str = "", captures: Optional[dict] = None, seqused_q=None,
                     seqused_k=None, alibi_slopes=None, block_table=None, sinks=None,
                     dropout_p: float = 0.0, dropout_seed: Optional[int] = None,
                     dropout_offset: int = 0):
    """Attention over a packed batch of variable lengths, FlashAttention's
    flash_attn_varlen_func: q is [total_q, heads_q, head_dim], k and v [total_k, heads_kv,
    head_dim], sequence i's rows from cu_seqlens_q[i] (cu_seqlens_k[i]) to the next entry
    (int32 [batch + 1], from 0, nondecreasing), max_seqlen_* the longest; v (and o) may be
    narrower than q and k, as attention() says (MLA's prefill). Options, dtypes,
    devices and gradients as attention(); the LSE is float32 [heads_q, total_q]. The index
    arrays are checked before anything runs (a ValueError names a bad entry). score_mod and
    mask_mod (and captures) as in attention(), with gradients; b is the sequence's index and
    q_idx, kv_idx positions within it.

    seqused_q and seqused_k (int32 [batch], each optional), FlashAttention's: sequence i uses
    only the first seqused_q[i] of its query rows and seqused_k[i] of its key rows (padding
    inside the packed buffers). The sequence is those rows alone (masks align to them); the
    rest is not read, and its rows of o (and of dq, dk, dv) come out 0, of the LSE -inf.

    alibi_slopes as in attention(), with each sequence's own seqlen_k − seqlen_q (its used
    rows').

    block_table (int32 [batch, max_pages], FlashAttention's): k and v are a paged KV cache
    instead, [num_pages, page_size, heads_kv, head_dim] (any page_size), key j of sequence i in
    row j % page_size of page block_table[i, j // page_size]; each sequence's key count is
    seqused_k[i], or the span of cu_seqlens_k (which may then be None); max_seqlen_k bounds
    them. Mixed prefill and decoding over a serving engine's cache. Forward only: a ValueError
    if a tensor requires grad under grad mode.

    sinks as in attention() (learnable attention sinks, with their gradient). dropout_p,
    dropout_seed and dropout_offset as in attention() (b of the mask is the sequence's index;
    not over a paged cache).

    With PyTorch 2.4 or later, torch tensors go through the custom operator
    flashjit::attention_varlen_forward (modifiers and captures included), which torch.compile
    traces whole."""
    score_mod, mask_mod, captured = modifiers(score_mod, mask_mod, captures, q)
    given = Options(causal, tuple(window), softcap, scale, deterministic, score_mod, mask_mod,
                    captured, float32(sinks), dropout_p,
                    drawn_dropout_seed(dropout_seed, dropout_p, q), dropout_offset)
    used = (seqused_q, seqused_k)
    if block_table is not None and wants_grad(q, k, v, given.sinks):
        raise ValueError("'block_table': attention over a paged cache has no backward (run it "
                         "under torch.no_grad(), or on tensors that do not require grad)")
    if _custom_ops.takes(q, k, v, cu_seqlens_q, cu_seqlens_k, *used, alibi_slopes, block_table,
                         given.sinks, *[x for _, x in given.captures]):
        o, lse = _forward_op(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                             int(max_seqlen_k), *used, alibi_slopes, *given.flags(),
                             *operator_modifiers(given), given.sinks, block_table,
                             float(given.dropout_p), int(given.dropout_seed),
                             int(given.dropout_offset))
        return (o, lse) if return_lse else o
    options = _with_alibi(given, alibi_slopes, q, cu_seqlens_q, cu_seqlens_k, used)
    if block_table is not None:
        o, lse = _varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                 max_seqlen_k, options, used, block_table)
    elif wants_grad(q, k, v, options.sinks, *[x for _, x in options.captures]):
        o, lse = _VarlenFunction.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                       max_seqlen_k, options, used, options.sinks,
                                       *[x for _, x in options.captures])
    else:
        o, lse = _varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                 max_seqlen_k, options, used)
    return (o, lse) if return_lse else o
