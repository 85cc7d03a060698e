"""attention() as PyTorch custom operators, flashjit::attention_forward and
flashjit::attention_backward (torch.library.custom_op, PyTorch 2.4 and later), with fake
implementations that give the outputs' shapes and dtypes without running anything, so that
torch.compile traces attention() whole instead of breaking its graph there. Where PyTorch has no
custom_op, attention() differentiates through an autograd.Function instead."""

from typing import Callable, Optional, Tuple

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

#: The forward operator when registered (call it with register()'s argument order), else None.
forward_op = None
#: Why the operators are not registered ("" when they are).
unavailable = "not registered yet"


def register(forward: Callable, backward: Callable, options: Callable) -> None:
    """Registers the operators around forward(q, k, v, options) -> (o, lse) and
    backward(dout, q, k, v, o, lse, options) -> (dq, dk, dv), where options(causal,
    window_left, window_right, softcap, scale, deterministic) builds their options."""
    global forward_op, unavailable
    if torch is None or not hasattr(torch.library, "custom_op"):
        unavailable = "this PyTorch has no torch.library.custom_op (2.4 and later have it)"
        return
    from torch import Tensor

    @torch.library.custom_op("flashjit::attention_forward", mutates_args=())
    def attention_forward(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int,
                          window_right: int, softcap: float, scale: Optional[float],
                          deterministic: bool) -> Tuple[Tensor, Tensor]:
        return forward(q, k, v, options(causal, window_left, window_right, softcap, scale,
                                        deterministic))

    @attention_forward.register_fake
    def _(q, k, v, causal, window_left, window_right, softcap, scale, deterministic):
        batch, seqlen_q, heads_q, _ = q.shape
        return (q.new_empty((batch, seqlen_q, heads_q, v.shape[3])),
                q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32))

    @torch.library.custom_op("flashjit::attention_backward", mutates_args=())
    def attention_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                           causal: bool, window_left: int, window_right: int, softcap: float,
                           scale: Optional[float],
                           deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
        return backward(dout, q, k, v, o, lse, options(causal, window_left, window_right, softcap,
                                                       scale, deterministic))

    @attention_backward.register_fake
    def _(dout, q, k, v, o, lse, *flags):
        return q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape)

    def setup_context(ctx, inputs, output):
        q, k, v, *flags = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.flags = flags
        ctx.mark_non_differentiable(lse)

    def differentiate(ctx, dout, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        grads = attention_backward(dout.contiguous(), q, k, v, o, lse, *ctx.flags)
        return (*grads, *([None] * len(ctx.flags)))

    attention_forward.register_autograd(differentiate, setup_context=setup_context)
    forward_op = attention_forward
    unavailable = ""
