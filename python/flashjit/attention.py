"""Attention over dense batches [batch, seqlen, heads, head_dim], FlashAttention's
flash_attn_func, with its backward and FlexAttention-style block masks. LSEs are natural-log,
[batch, heads, seqlen]."""

import ctypes
import dataclasses
from typing import List, Optional, Tuple

import numpy as np

from . import _capi, _custom_ops
from ._alibi import with_alibi
from ._arrays import DTYPE_CODES, Launch, is_torch
from ._options import (ATTENTION_NAMES, Options, bind_captures, call_options, capture_gradients,
                       capture_inputs, drawn_dropout_seed, element, float32, int32_full,
                       operator_modifiers, operator_options, shape_of, wants_grad)
from ._symbols import torch_compiling
from ._trace import modifiers

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _dense_options(q, k, v, options: Options) -> _capi.flashjit_attention:
    layout = "[batch, seqlen, heads, head_dim]"
    b, sq, hq, d = shape_of("q", q, 4, layout)
    _, sk, hk, _ = shape_of("k", k, 4, layout)
    value_dim = shape_of("v", v, 4, layout)[3]
    a = call_options(options, b, hq, hk, sq, sk, d)
    a.head_dim_v = value_dim if value_dim != d else 0  # MLA: v narrower than q and k
    return a


_DESCALES = ("q_descale", "k_descale", "v_descale")


def _forward(q, k, v, options: Options, block_mask=None, descales=(None, None, None)):
    a = _dense_options(q, k, v, options)
    with Launch({"q": q, "k": k, "v": v, "block_mask": block_mask, **capture_inputs(options),
                 **{name: float32(x) for name, x in zip(_DESCALES, descales)}}) as launch:
        bind_captures(a, launch, options)
        a.block_mask = _capi.field_pointer(launch.input("block_mask"))
        for name in _DESCALES:  # the fp8 forward's factors
            setattr(a, name, _capi.field_pointer(launch.input(name)))
        out = "bf16" if element(q) == "e4m3" else element(q)  # the fp8 forward writes bf16
        o = launch.output("o", (*q.shape[:3], v.shape[3]), out)
        lse = launch.output("lse", (a.batch, a.heads_q, a.seqlen_q), "f32")
        _capi.check(_capi.library().flashjit_attention_forward(
            launch.runtime.handle, ctypes.byref(a), _capi.pointer(launch.input("q")),
            _capi.pointer(launch.input("k")), _capi.pointer(launch.input("v")),
            _capi.pointer(o), _capi.pointer(lse), launch.stream), ATTENTION_NAMES)
        return launch.result("o"), launch.result("lse")


def _backward(dout, q, k, v, o, lse, options: Options, capture_grads=None, block_mask=None,
              sinks_grad=None):
    a = _dense_options(q, k, v, options)
    with Launch({"dout": dout, "q": q, "k": k, "v": v, "o": o, "lse": lse,
                 "block_mask": block_mask,
                 **capture_inputs(options, capture_grads, sinks_grad)}) as launch:
        bind_captures(a, launch, options, capture_grads, sinks_grad)
        a.block_mask = _capi.field_pointer(launch.input("block_mask"))
        dq = launch.output("dq", q.shape, element(q))
        dk = launch.output("dk", k.shape, element(q))
        dv = launch.output("dv", v.shape, element(q))
        _capi.check(_capi.library().flashjit_attention_backward(
            launch.runtime.handle, ctypes.byref(a), *[_capi.pointer(launch.input(n)) for n in
                                                      ("q", "k", "v", "o", "lse", "dout")],
            _capi.pointer(dq), _capi.pointer(dk), _capi.pointer(dv), launch.stream),
            ATTENTION_NAMES)
        launch.write_back()  # the captures' and the sinks' gradients, on the emulator
        return launch.result("dq"), launch.result("dk"), launch.result("dv")


if torch is not None:

    class _AttentionFunction(torch.autograd.Function):
        """attention() with its gradients from the backward kernels (LSE recomputation); the
        sinks (options.sinks, or None) and the captures' tensors come last, so that those
        requiring grad get theirs."""

        @staticmethod
        def forward(ctx, q, k, v, options, block_mask, sinks, *capture_tensors):
            o, lse = _forward(q, k, v, options, block_mask)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.options = options
            ctx.block_mask = block_mask  # the backward skips the same blocks
            ctx.mark_non_differentiable(lse)
            return o, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            q, k, v, o, lse = ctx.saved_tensors
            captures = ctx.options.captures
            grads = {name: torch.zeros_like(x, dtype=torch.float32)
                     for i, (name, x) in enumerate(captures) if ctx.needs_input_grad[6 + i]}
            sinks = ctx.options.sinks
            sinks_grad = torch.empty_like(sinks) if ctx.needs_input_grad[5] else None
            dq, dk, dv = _backward(dout.contiguous(), q, k, v, o, lse, ctx.options, grads,
                                   ctx.block_mask, sinks_grad)
            return (dq, dk, dv, None, None, sinks_grad,
                    *[grads[name].to(x.dtype) if name in grads else None
                      for name, x in captures])


if _custom_ops.AVAILABLE:
    from torch import Tensor

    def _fake_forward(q, k, v, *rest):
        batch, seqlen_q, heads_q, _ = q.shape
        return (q.new_empty((batch, seqlen_q, heads_q, v.shape[3])),
                q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32))

    def _fake_backward(dout, q, k, v, o, lse, *rest):
        return q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape)

    @_custom_ops.define("attention_backward", _fake_backward)
    def _backward_op(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                     causal: bool, window_left: int, window_right: int, softcap: float,
                     scale: Optional[float], deterministic: bool,
                     alibi_slopes: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
        options = Options.of_flags(causal, window_left, window_right, softcap, scale,
                                   deterministic)
        return _backward(dout, q, k, v, o, lse, _dense_alibi(options, q, k, alibi_slopes))

    def _save(ctx, inputs, output):
        q, k, v, *rest = inputs
        ctx.save_for_backward(q, k, v, *output)
        ctx.rest = rest  # the flags and the slopes (which get no gradient)
        ctx.mark_non_differentiable(output[1])

    def _differentiate(ctx, dout, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        grads = _backward_op(dout.contiguous(), q, k, v, o, lse, *ctx.rest)
        return (*grads, *([None] * len(ctx.rest)))

    @_custom_ops.define("attention_forward", _fake_forward, backward=_differentiate,
                        setup_context=_save)
    def _forward_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int,
                    window_right: int, softcap: float, scale: Optional[float],
                    deterministic: bool, alibi_slopes: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        options = Options.of_flags(causal, window_left, window_right, softcap, scale,
                                   deterministic)
        return _forward(q, k, v, _dense_alibi(options, q, k, alibi_slopes))


    def _modified_flags(options: Options, block_mask) -> tuple:
        """The modifier operators' arguments after q, k and v: flags(), the modifiers, the
        block mask, the sinks and the dropout (p, seed, offset)."""
        return (*options.flags(), *operator_modifiers(options), block_mask, options.sinks,
                float(options.dropout_p), int(options.dropout_seed), int(options.dropout_offset))

    @_custom_ops.define("attention_backward_modified", _fake_backward,
                        mutates_args=("capture_grads", "sinks_grad"))
    def _modified_backward_op(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor,
                              lse: Tensor, causal: bool, window_left: int, window_right: int,
                              softcap: float, scale: Optional[float], deterministic: bool,
                              score_mod: str, mask_mod: str, capture_names: str,
                              captures: List[Tensor], block_mask: Optional[Tensor],
                              sinks: Optional[Tensor], dropout_p: float, dropout_seed: int,
                              dropout_offset: int, wanted: List[bool],
                              capture_grads: List[Tensor],
                              sinks_grad: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
        """The backward with modifiers, sinks and dropout (the forward's p, seed and offset);
        the gradients of the captures whose `wanted` is true are added into capture_grads (one
        each, in order; float32, zeroed by the caller), the sinks' written into sinks_grad
        where given."""
        options = operator_options((causal, window_left, window_right, softcap, scale,
                                    deterministic), score_mod, mask_mod, capture_names, captures,
                                   sinks, (dropout_p, dropout_seed, dropout_offset))
        names = [name for (name, _), w in zip(options.captures, wanted) if w]
        return _backward(dout, q, k, v, o, lse, options, dict(zip(names, capture_grads)),
                         block_mask, sinks_grad)

    def _save_modified(ctx, inputs, output):
        q, k, v, *rest = inputs
        ctx.save_for_backward(q, k, v, *output)
        ctx.rest = rest
        ctx.wanted = [x.requires_grad for x in rest[9]]  # the captures that get gradients
        ctx.wants_sinks_grad = rest[11] is not None and rest[11].requires_grad
        ctx.mark_non_differentiable(output[1])

    def _differentiate_modified(ctx, dout, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        captures, sinks = ctx.rest[9], ctx.rest[11]
        grads = capture_gradients(captures, ctx.wanted)
        sinks_grad = torch.empty_like(sinks) if ctx.wants_sinks_grad else None
        dq, dk, dv = _modified_backward_op(dout.contiguous(), q, k, v, o, lse, *ctx.rest,
                                           ctx.wanted, [g for g in grads if g is not None],
                                           sinks_grad)
        capture_grads = [None if g is None else g.to(x.dtype) for g, x in zip(grads, captures)]
        return (dq, dk, dv, *([None] * 9), capture_grads, None, sinks_grad, None, None, None)

    @_custom_ops.define("attention_forward_modified", _fake_forward,
                        backward=_differentiate_modified, setup_context=_save_modified)
    def _modified_forward_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int,
                             window_right: int, softcap: float, scale: Optional[float],
                             deterministic: bool, score_mod: str, mask_mod: str,
                             capture_names: str, captures: List[Tensor],
                             block_mask: Optional[Tensor], sinks: Optional[Tensor],
                             dropout_p: float, dropout_seed: int,
                             dropout_offset: int) -> Tuple[Tensor, Tensor]:
        """The forward with score_mod and mask_mod (texts of the modifier language) reading the
        captures, named in capture_names (comma-separated; schemas have no list of str), the
        sinks (float32 [heads_q], or None) and the dropout (p, seed, offset)."""
        options = operator_options((causal, window_left, window_right, softcap, scale,
                                    deterministic), score_mod, mask_mod, capture_names, captures,
                                   sinks, (dropout_p, dropout_seed, dropout_offset))
        return _forward(q, k, v, options, block_mask)


    def _fake_fp8_forward(q, k, v, *rest):
        batch, seqlen_q, heads_q, _ = q.shape
        return (q.new_empty((batch, seqlen_q, heads_q, v.shape[3]), dtype=torch.bfloat16),
                q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32))

    @_custom_ops.define("attention_forward_fp8", _fake_fp8_forward)
    def _fp8_forward_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int,
                        window_right: int, softcap: float, scale: Optional[float],
                        sinks: Optional[Tensor], q_descale: Optional[Tensor],
                        k_descale: Optional[Tensor],
                        v_descale: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """The fp8 forward: e4m3 q, k and v, their descale factors (float32, or None), o
        bfloat16; no gradient (there is no fp8 backward)."""
        options = dataclasses.replace(
            Options.of_flags(causal, window_left, window_right, softcap, scale, False),
            sinks=sinks)
        return _forward(q, k, v, options, None, (q_descale, k_descale, v_descale))


def _modified(q, k, v, options: Options, block_mask):
    """attention() with modifiers, sinks or dropout: (o, lse), differentiable in q, k, v, the
    captures and the sinks."""
    tensors = [x for _, x in options.captures]
    if _custom_ops.takes(q, k, v, *tensors, block_mask, options.sinks):
        return _modified_forward_op(q, k, v, *_modified_flags(options, block_mask))
    if wants_grad(q, k, v, options.sinks, *tensors):
        return _AttentionFunction.apply(q, k, v, options, block_mask, options.sinks, *tensors)
    return _forward(q, k, v, options, block_mask)


def _prepare(q, k, v, options: Options, block_mask, backward: bool) -> None:
    """Makes ready the kernels a call of attention() with these arrays and options launches
    and, with `backward`, its backward's (flashjit_attention_prepare): compiled concurrently or
    loaded from the kernel cache, none run."""
    a = _dense_options(q, k, v, options)
    if element(q) not in ("f16", "bf16", "e4m3"):
        raise ValueError(f"'q' must be float16 or bfloat16 (the kernels' inputs) or e4m3 codes "
                         f"(the fp8 forward's), not {element(q)}")
    if element(q) == "e4m3" and backward:
        raise ValueError("'backward' must be False for e4m3 q, k and v: the fp8 forward has no "
                         "backward")
    with Launch({"q": q, "k": k, "v": v, "block_mask": block_mask,
                 **capture_inputs(options)}) as launch:
        bind_captures(a, launch, options)
        a.block_mask = _capi.field_pointer(launch.input("block_mask"))
        _capi.check(_capi.library().flashjit_attention_prepare(
            launch.runtime.handle, ctypes.byref(a), DTYPE_CODES[element(q)], int(bool(backward))),
            ATTENTION_NAMES)


_prepared = set()  # what _prepare_once has made ready in this process


def _prepare_once(q, k, v, options: Options, block_mask, alibi_slopes) -> None:
    """Before a differentiable call's first forward of its kind (shapes, dtype, device,
    options), its forward's and its backward's kernels made ready together, concurrently: the
    backward then finds its own ready instead of compiling them one call later. A call of a
    known kind costs one set lookup (the slopes' captures are made on a new kind only)."""
    key = (tuple(q.shape), tuple(k.shape), tuple(v.shape), str(q.dtype), str(q.device),
           options.flags(), options.score_mod, options.mask_mod, options.dropout_p > 0,
           tuple((name, str(x.dtype), x.ndim) for name, x in options.captures),
           block_mask is not None, None if alibi_slopes is None else tuple(alibi_slopes.shape))
    if key not in _prepared:
        _prepare(q, k, v, _dense_alibi(options, q, k, alibi_slopes), block_mask, backward=True)
        _prepared.add(key)


def _dense_alibi(options: Options, q, k, slopes) -> Options:
    """options with alibi_slopes' bias for a dense call (q and k's shapes checked first)."""
    if slopes is None:
        return options
    layout = "[batch, seqlen, heads, head_dim]"
    batch, seqlen_q, heads_q, _ = shape_of("q", q, 4, layout)
    offset = shape_of("k", k, 4, layout)[1] - seqlen_q
    return with_alibi(options, slopes, int32_full(q, batch, offset), batch, heads_q)


def attention(q, k, v, *, causal: bool = False, window: Tuple[int, int] = (-1, -1),
              softcap: float = 0.0, scale: Optional[float] = None, deterministic: bool = False,
              return_lse: bool = False, score_mod="", mask_mod="",
              block_mask=None, captures: Optional[dict] = None, alibi_slopes=None, sinks=None,
              dropout_p: float = 0.0, dropout_seed: Optional[int] = None,
              dropout_offset: int = 0, q_descale=None, k_descale=None, v_descale=None):
    """Attention over a dense batch, FlashAttention's flash_attn_func.

    q is [batch, seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim]
    (heads_q a multiple of heads_kv: GQA/MQA), head_dim a multiple of 8 up to 256; v may be
    narrower, [..., head_dim_v] with head_dim_v a multiple of 8 up to head_dim (MLA: 192 and
    128), and o then has its width; numpy float16 or torch float16/bfloat16, all on one device
    (host memory runs on the CPU emulator, a CUDA tensor on its GPU, on the current stream).
    `causal` aligns the mask bottom-right; `window` is (left, right) keys around the diagonal,
    -1 unbounded; `softcap` > 0 caps the scores with softcap * tanh(s / softcap); `scale`
    defaults to 1/sqrt(head_dim). torch tensors that require grad get gradients from flashjit's
    backward (`deterministic`: the same bits on every run). Returns o like q (v's head dim), and
    with `return_lse` also the natural-log LSE, float32 [batch, heads_q, seqlen_q] (not
    differentiated). A bad argument raises ValueError naming it; nothing is launched then. With
    PyTorch 2.4 or later, torch tensors go through the custom operator
    flashjit::attention_forward, which torch.compile traces without a graph break.

    `score_mod` and `mask_mod` are expressions of the modifiers' grammar (docs/modifiers.md: C++
    operators over `score` (scaled, soft-capped), `b`, `h`, `q_idx`, `kv_idx`, the captures,
    numbers and a fixed list of math functions such as tanhf, expf, min, float(x)), parsed
    before they are compiled into the kernel: the score the softmax sees, and whether query
    q_idx sees key kv_idx. Anything else raises ValueError naming the field. Gradients flow
    through score_mod (the backward evaluates it on dual numbers). `block_mask`
    (build_block_mask()'s, for this mask_mod and these sizes) lets the forward skip the key
    blocks the mask hides from whole query blocks; a mask_mod that reads no capture gets one
    built by the runtime without asking (once per mask and sizes). Either modifier may instead
    be a Python callable with FlexAttention's signature, score_mod(score, b, h, q_idx, kv_idx) and
    mask_mod(b, h, q_idx, kv_idx), traced into that language on each call (tensors it indexes
    become captures, its Python numbers a captured table; see trace_modifiers()); None is no
    modifier.
    `captures` maps names to arrays the expressions read (`doc[b][q_idx] == doc[b][kv_idx]`):
    rank 1 to 4, float32/float16/bfloat16 (read as float) or int32, like q (numpy or torch, on
    its device). A torch capture that requires grad gets its gradient (a learnable bias table:
    read it once in score_mod; see docs/modifiers.md).

    `alibi_slopes` (FlashAttention's; [heads_q] or [batch, heads_q], any float dtype, like q):
    the bias −slope · |i + seqlen_k − seqlen_q − j| added to the score of query i and key j
    after scale and softcap, compiled in as a score_mod (so not with one of your own); the
    slopes get no gradient.

    `sinks` (gpt-oss's learnable attention sinks; FlashAttention's `learnable_sink`): one logit
    per query head, [heads_q], any float dtype (used as float32), like q, that joins every
    row's softmax denominator and adds nothing to o; the LSE then includes it. A torch tensor
    that requires grad gets its gradient.

    `dropout_p` (FlashAttention's): each probability is kept with probability 1 − dropout_p
    and scaled by 1 / (1 − dropout_p), or zeroed (the LSE is the undropped softmax's); the
    mask is a pure function of (dropout_seed, dropout_offset, batch entry, head, query, key)
    (docs/attention.md#dropout), regenerated by the backward. `dropout_seed` None draws one
    from torch's default generator (torch tensors; numpy's global one for arrays), so
    torch.manual_seed makes a run repeat; an int in [0, 2**63) fixes the mask. The gradients
    of a differentiable call use the forward's seed. e4m3 q, k, v and *_descale: _fp8_attention."""
    if element(q) == "e4m3" or any(x is not None for x in (q_descale, k_descale, v_descale)):
        return _fp8_attention(q, k, v, (causal, window, softcap, scale, sinks, return_lse),
                              (q_descale, k_descale, v_descale), score_mod or mask_mod or
                              block_mask is not None or captures or dropout_p)
    score_mod, mask_mod, captured = modifiers(score_mod, mask_mod, captures, q)
    given = Options(causal, tuple(window), softcap, scale, deterministic, score_mod, mask_mod,
                    captured, float32(sinks), dropout_p,
                    drawn_dropout_seed(dropout_seed, dropout_p, q), dropout_offset)
    if wants_grad(q, k, v, *[x for _, x in captured]) and not torch_compiling():
        _prepare_once(q, k, v, given, block_mask, alibi_slopes)
    if score_mod or mask_mod or sinks is not None or dropout_p:
        o, lse = _modified(q, k, v, _dense_alibi(given, q, k, alibi_slopes), block_mask)
    elif block_mask is not None:
        raise ValueError("'block_mask' needs the 'mask_mod' it was built from")
    elif _custom_ops.takes(q, k, v, alibi_slopes):  # (the slopes are read inside)
        o, lse = _forward_op(q, k, v, *given.flags(), alibi_slopes)
    elif alibi_slopes is not None:
        o, lse = _modified(q, k, v, _dense_alibi(given, q, k, alibi_slopes), None)
    elif wants_grad(q, k, v):
        o, lse = _AttentionFunction.apply(q, k, v, given, None, None)
    else:
        o, lse = _forward(q, k, v, given)
    return (o, lse) if return_lse else o


def _fp8_attention(q, k, v, flags, descales, unsupported):
    """The fp8 forward (FlashAttention-3's): q, k and v e4m3 codes (torch.float8_e4m3fn, or
    uint8), o bfloat16 (float32 for numpy, which has no bfloat16); their true values are the
    codes times `descales` (q's, k's, v's: any float dtype, [1], [heads_kv] or [batch,
    heads_kv], like q; None: 1). P is rounded to e4m3 for P V. On sm_89 and later (sm_90a too)
    and the emulator modelling one; no gradient (there is no fp8 backward); `unsupported`
    (modifiers, a block mask, captures, dropout) raises ValueError (docs/attention.md, "The fp8
    forward"). `flags`: attention()'s causal, window, softcap, scale, sinks and return_lse."""
    if unsupported:
        raise ValueError("the fp8 forward takes no score_mod, mask_mod, block_mask, captures or "
                         "dropout_p")
    causal, window, softcap, scale, sinks, return_lse = flags
    options = Options(causal, tuple(window), softcap, scale, sinks=float32(sinks))
    if _custom_ops.takes(q, k, v, options.sinks, *descales):  # traced: one graph
        factors = [float32(x) for x in descales]
        o, lse = _fp8_forward_op(q, k, v, *options.flags()[:5], options.sinks, *factors)
    else:
        o, lse = _forward(q, k, v, options, None, descales)
    return (o, lse) if return_lse else o


def build_block_mask(mask_mod: str, batch: int, heads_q: int, seqlen_q: int, seqlen_k: int, *,
                     like, captures: Optional[dict] = None):
    """The block mask of `mask_mod` for attention() calls of these sizes (FlexAttention's
    create_block_mask): int32 [batch, heads_q, ceil(seqlen_q / 16), 4], on `like`'s device and
    of its kind (numpy or torch; pass the q of the calls), built once by evaluating the mask for
    every (batch, head, query, key) and reused by every call with that mask_mod and sizes.
    `captures`: the tensors mask_mod reads, as in attention() (the block mask holds what they
    held when it was built)."""
    _, mask_mod, captured = modifiers("", mask_mod, captures, like)
    options = Options(mask_mod=mask_mod, captures=captured)
    a = call_options(options, batch, heads_q, 1, seqlen_q, seqlen_k, 64)
    with Launch({"like": like, **capture_inputs(options)}) as launch:
        bind_captures(a, launch, options)
        mask = launch.output("block_mask", (batch, heads_q, (seqlen_q + 15) // 16, 4), "i32")
        _capi.check(_capi.library().flashjit_build_block_mask(
            launch.runtime.handle, ctypes.byref(a), _capi.pointer(mask), launch.stream))
        return launch.result("block_mask")


def attention_backward(dout, q, k, v, o, lse, *, causal: bool = False,
                       window: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                       scale: Optional[float] = None, deterministic: bool = False,
                       score_mod: str = "", mask_mod: str = "", block_mask=None,
                       captures: Optional[dict] = None, alibi_slopes=None, sinks=None,
                       dropout_p: float = 0.0, dropout_seed: Optional[int] = None,
                       dropout_offset: int = 0):
    """The gradients (dq, dk, dv) of attention() for its output gradient `dout` (like q), given
    that call's arguments (its score_mod, mask_mod, block_mask, captures, alibi_slopes, sinks
    and dropout included: with dropout_p, the forward's dropout_seed and dropout_offset) and
    its o and lse (return_lse=True). For numpy callers, and for torch callers who keep their
    own graph; dk and dv sum over the query heads sharing a key/value head. With `sinks`,
    returns (dq, dk, dv, dsinks): the sinks' gradient, float32 [heads_q]."""
    if dropout_p and dropout_seed is None:
        raise ValueError("'dropout_seed' must be the forward's (an int) with dropout_p: the "
                         "backward regenerates that call's mask")
    score_mod, mask_mod, captured = modifiers(score_mod, mask_mod, captures, q)
    options = _dense_alibi(Options(causal, tuple(window), softcap, scale, deterministic,
                                   score_mod, mask_mod, captured, float32(sinks), dropout_p,
                                   dropout_seed or 0, dropout_offset), q, k, alibi_slopes)
    if block_mask is not None and not mask_mod:
        raise ValueError("'block_mask' needs the 'mask_mod' it was built from")
    if sinks is None:
        return _backward(dout, q, k, v, o, lse, options, block_mask=block_mask)
    # Written by the backward: float32 [heads_q] of the sinks' kind.
    dsinks = torch.empty_like(options.sinks) if is_torch(sinks) else np.empty_like(options.sinks)
    return (*_backward(dout, q, k, v, o, lse, options, block_mask=block_mask,
                       sinks_grad=dsinks), dsinks)


