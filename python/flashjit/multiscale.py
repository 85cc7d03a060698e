"""Multi-scale attention (retention): attention weights taken as they are, times a decay or a
given mask, normalized by the row sum of their magnitudes instead of a softmax."""

import ctypes
from typing import Optional, Tuple

from . import _capi, _custom_ops
from ._arrays import Launch, dtype_name
from ._options import wants_grad

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _options(q, k, decay, mask, scale) -> _capi.flashjit_multiscale_attention:
    layout = "[batch, seqlen, heads, head_dim]"
    for name, x in (("q", q), ("k", k)):
        dtype_name(name, x)
        if x.ndim != 4:
            raise ValueError(f"'{name}' must be {layout} (rank 4), not shape {tuple(x.shape)}")
    if (decay is None) == (mask is None):
        raise ValueError("pass exactly one of 'decay' ([heads_q] rates) and 'mask' "
                         "([heads_q, seqlen_q, seqlen_k])")
    if scale is not None and not scale > 0:
        raise ValueError(f"'scale' must be positive (or None for 1/sqrt(head_dim)), not {scale!r}")
    options = _capi.flashjit_multiscale_attention()
    _capi.library().flashjit_multiscale_attention_init(ctypes.byref(options))
    options.batch, options.seqlen_q, options.heads_q, options.head_dim = (int(s) for s in q.shape)
    options.seqlen_k, options.heads_kv = int(k.shape[1]), int(k.shape[2])
    options.scale = 0.0 if scale is None else float(scale)
    options.mask = (_capi.FLASHJIT_MULTISCALE_DECAY if decay is not None
                    else _capi.FLASHJIT_MULTISCALE_TENSOR)
    if decay is not None and tuple(decay.shape) != (options.heads_q,):
        # The C API names this argument 'mask'; the caller passed it as 'decay'.
        raise ValueError(f"'decay' must be [heads_q] = [{options.heads_q}], not shape "
                         f"{tuple(decay.shape)}")
    return options


def _forward(q, k, v, decay, mask, scale):
    options = _options(q, k, decay, mask, scale)
    with Launch({"q": q, "k": k, "v": v, "decay": decay, "mask": mask}) as launch:
        o = launch.output("o", q.shape, dtype_name("q", q))
        rowsum = launch.output("rowsum", (options.batch, options.heads_q, options.seqlen_q), "f32")
        _capi.check(_capi.library().flashjit_multiscale_forward(
            launch.runtime.handle, ctypes.byref(options), _capi.pointer(launch.input("q")),
            _capi.pointer(launch.input("k")), _capi.pointer(launch.input("v")),
            _capi.pointer(launch.input("decay" if decay is not None else "mask")),
            _capi.pointer(o), _capi.pointer(rowsum), launch.stream))
        return launch.result("o"), launch.result("rowsum")


def _backward(dout, q, k, v, decay, mask, o, rowsum, scale, want_dmask: bool):
    options = _options(q, k, decay, mask, scale)
    with Launch({"dout": dout, "q": q, "k": k, "v": v, "decay": decay, "mask": mask, "o": o,
                 "rowsum": rowsum}) as launch:
        element = dtype_name("q", q)
        dq = launch.output("dq", q.shape, element)
        dk = launch.output("dk", k.shape, element)
        dv = launch.output("dv", v.shape, element)
        dmask = launch.output("dmask", mask.shape, "f32") if want_dmask else None
        _capi.check(_capi.library().flashjit_multiscale_backward(
            launch.runtime.handle, ctypes.byref(options), _capi.pointer(launch.input("q")),
            _capi.pointer(launch.input("k")), _capi.pointer(launch.input("v")),
            _capi.pointer(launch.input("decay" if decay is not None else "mask")),
            _capi.pointer(launch.input("o")), _capi.pointer(launch.input("rowsum")),
            _capi.pointer(launch.input("dout")), _capi.pointer(dq), _capi.pointer(dk),
            _capi.pointer(dv), _capi.pointer(dmask), launch.stream))
        return (launch.result("dq"), launch.result("dk"), launch.result("dv"),
                launch.result("dmask") if want_dmask else None)


if torch is not None:

    class _MultiScaleFunction(torch.autograd.Function):
        """multiscale_attention() with its gradients from the backward kernel (no atomics)."""

        @staticmethod
        def forward(ctx, q, k, v, decay, mask, scale):
            o, rowsum = _forward(q, k, v, decay, mask, scale)
            ctx.save_for_backward(q, k, v, decay, mask, o, rowsum)
            ctx.scale = scale
            return o

        @staticmethod
        def backward(ctx, dout):
            q, k, v, decay, mask, o, rowsum = ctx.saved_tensors
            want_dmask = mask is not None and ctx.needs_input_grad[4]
            dq, dk, dv, dmask = _backward(dout.contiguous(), q, k, v, decay, mask, o, rowsum,
                                          ctx.scale, want_dmask)
            return dq, dk, dv, None, dmask, None


if _custom_ops.AVAILABLE:
    from torch import Tensor

    def _fake_forward(q, k, v, decay, mask, scale):
        batch, seqlen_q, heads_q, _ = q.shape
        return q.new_empty(q.shape), q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32)

    def _fake_backward(dout, q, k, v, decay, mask, o, rowsum, scale, want_dmask):
        dmask = (q.new_empty(mask.shape, dtype=torch.float32) if want_dmask else
                 _custom_ops.empty_like_none(q))
        return q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape), dmask

    @_custom_ops.define("multiscale_attention_backward", _fake_backward)
    def _backward_op(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, decay: Optional[Tensor],
                     mask: Optional[Tensor], o: Tensor, rowsum: Tensor, scale: Optional[float],
                     want_dmask: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        dq, dk, dv, dmask = _backward(dout, q, k, v, decay, mask, o, rowsum, scale, want_dmask)
        return dq, dk, dv, _custom_ops.empty_like_none(q) if dmask is None else dmask

    def _save(ctx, inputs, output):
        q, k, v, decay, mask, scale = inputs
        ctx.save_for_backward(q, k, v, decay, mask, *output)
        ctx.scale = scale
        ctx.mark_non_differentiable(output[1])

    def _differentiate(ctx, dout, _drowsum):
        q, k, v, decay, mask, o, rowsum = ctx.saved_tensors
        want_dmask = mask is not None and ctx.needs_input_grad[4]
        dq, dk, dv, dmask = _backward_op(dout.contiguous(), q, k, v, decay, mask, o, rowsum,
                                         ctx.scale, want_dmask)
        return dq, dk, dv, None, dmask if want_dmask else None, None

    @_custom_ops.define("multiscale_attention_forward", _fake_forward, backward=_differentiate,
                        setup_context=_save)
    def _forward_op(q: Tensor, k: Tensor, v: Tensor, decay: Optional[Tensor],
                    mask: Optional[Tensor], scale: Optional[float]) -> Tuple[Tensor, Tensor]:
        return _forward(q, k, v, decay, mask, scale)


def multiscale_attention(q, k, v, *, decay=None, mask=None, scale: Optional[float] = None):
    """Multi-scale attention, as in RetNet: per batch and query head, S = scale · (q kᵀ) ∘ M,
    o = S v / max(rowsum(|S|), 1).

    q is [batch, seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim]
    (GQA/MQA as in attention()), float16 (numpy or torch) or bfloat16 (torch), head_dim a
    multiple of 8 up to 256. M is one of:
      - `decay`: float32 [heads_q], one rate γ in [0, 1] per query head; M[n, m] = γ^(n − m)
        for m ≤ n (n = i + seqlen_k − seqlen_q: bottom-right aligned, as causal attention),
        0 above the diagonal; generated inside the kernel;
      - `mask`: float32 [heads_q, seqlen_q, seqlen_k], any mask, contiguous in its last
        dimension; differentiable (its gradient sums over the batch).
    `scale` defaults to 1/sqrt(head_dim). torch tensors that require grad get gradients of q, k,
    v (and the mask) from flashjit's backward, which has no atomics (the same bits on every
    run); the decay rates get none. Returns o like q. A bad argument raises ValueError naming
    it; nothing is launched then. With PyTorch 2.4 or later, torch tensors go through the custom
    operator flashjit::multiscale_attention_forward, which torch.compile traces whole."""
    if _custom_ops.takes(q, k, v, decay, mask):
        return _forward_op(q, k, v, decay, mask, None if scale is None else float(scale))[0]
    if wants_grad(q, k, v, mask):
        return _MultiScaleFunction.apply(q, k, v, decay, mask, scale)
    return _forward(q, k, v, decay, mask, scale)[0]
