"""Layer norm and RMS norm over the last dimension, differentiable for torch tensors."""

import ctypes

from typing import Optional, Tuple

import numpy as np

from . import _capi, _custom_ops
from ._arrays import Launch, dtype_name, is_torch
from ._options import wants_grad

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _options(epsilon: float, rms: bool) -> _capi.flashjit_layer_norm:
    options = _capi.flashjit_layer_norm()
    _capi.library().flashjit_layer_norm_init(ctypes.byref(options))
    if not epsilon > 0:
        raise ValueError(f"'eps' must be positive, not {epsilon!r}")
    options.epsilon = float(epsilon)
    options.rms = int(rms)
    return options


def _rows(name: str, x):
    dtype_name(name, x)
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError(f"'{name}' must have a last dimension of 1 or more, not shape "
                         f"{tuple(x.shape)}")
    return x.reshape(-1, x.shape[-1])


def _forward(x, weight, bias, epsilon: float, rms: bool):
    x2 = _rows("x", x)
    rows = x2.shape[0]
    options = _options(epsilon, rms)
    with Launch({"x": x2, "weight": weight, "bias": bias}) as launch:
        y = launch.output("y", x2.shape, dtype_name("x", x))
        mean = None if rms else launch.output("mean", (rows,), "f32")
        rstd = launch.output("rstd", (rows,), "f32")
        _capi.check(_capi.library().flashjit_layer_norm_forward(
            launch.runtime.handle, ctypes.byref(options), _capi.pointer(launch.input("x")),
            _capi.pointer(launch.input("weight")), _capi.pointer(launch.input("bias")),
            _capi.pointer(y), _capi.pointer(mean), _capi.pointer(rstd), launch.stream))
        return (launch.result("y").reshape(x.shape), None if rms else launch.result("mean"),
                launch.result("rstd"))


def _backward(dy, x, weight, mean, rstd, epsilon: float, rms: bool):
    x2, dy2 = _rows("x", x), _rows("dy", dy)
    options = _options(epsilon, rms)
    with Launch({"x": x2, "weight": weight, "mean": mean, "rstd": rstd, "dy": dy2}) as launch:
        element = dtype_name("x", x)
        dx = launch.output("dx", x2.shape, element)
        dweight = launch.output("dweight", weight.shape, element)
        dbias = None if rms else launch.output("dbias", weight.shape, element)
        _capi.check(_capi.library().flashjit_layer_norm_backward(
            launch.runtime.handle, ctypes.byref(options), _capi.pointer(launch.input("x")),
            _capi.pointer(launch.input("weight")), _capi.pointer(launch.input("mean")),
            _capi.pointer(launch.input("rstd")), _capi.pointer(launch.input("dy")),
            _capi.pointer(dx), _capi.pointer(dweight), _capi.pointer(dbias), None, launch.stream))
        return (launch.result("dx").reshape(x.shape), launch.result("dweight"),
                None if rms else launch.result("dbias"))


if torch is not None:

    class _NormFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias, epsilon, rms):
            y, mean, rstd = _forward(x, weight, bias, epsilon, rms)
            ctx.save_for_backward(x, weight, rstd, *(() if rms else (mean,)))
            ctx.epsilon, ctx.rms = epsilon, rms
            return y

        @staticmethod
        def backward(ctx, dy):
            x, weight, rstd, *mean = ctx.saved_tensors
            dx, dweight, dbias = _backward(dy.contiguous(), x, weight, mean[0] if mean else None,
                                           rstd, ctx.epsilon, ctx.rms)
            return dx, dweight, dbias, None, None


if _custom_ops.AVAILABLE:
    from torch import Tensor

    def _fake_forward(x, weight, bias, eps, rms):
        rows = x.numel() // x.shape[-1]
        mean = _custom_ops.empty_like_none(x) if rms else x.new_empty((rows,), dtype=torch.float32)
        return x.new_empty(x.shape), mean, x.new_empty((rows,), dtype=torch.float32)

    def _fake_backward(dy, x, weight, mean, rstd, eps, rms):
        return (x.new_empty(x.shape), x.new_empty(weight.shape),
                _custom_ops.empty_like_none(x) if rms else x.new_empty(weight.shape))

    @_custom_ops.define("layer_norm_backward", _fake_backward)
    def _backward_op(dy: Tensor, x: Tensor, weight: Tensor, mean: Optional[Tensor], rstd: Tensor,
                     eps: float, rms: bool) -> Tuple[Tensor, Tensor, Tensor]:
        dx, dweight, dbias = _backward(dy, x, weight, mean, rstd, eps, rms)
        return dx, dweight, _custom_ops.empty_like_none(x) if dbias is None else dbias

    def _save(ctx, inputs, output):
        x, weight, bias, eps, rms = inputs
        _, mean, rstd = output
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.eps, ctx.rms, ctx.has_bias = eps, rms, bias is not None
        ctx.mark_non_differentiable(mean, rstd)

    def _differentiate(ctx, dy, _dmean, _drstd):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dweight, dbias = _backward_op(dy.contiguous(), x, weight, None if ctx.rms else mean,
                                          rstd, ctx.eps, ctx.rms)
        return dx, dweight, dbias if ctx.has_bias else None, None, None

    @_custom_ops.define("layer_norm_forward", _fake_forward, backward=_differentiate,
                        setup_context=_save)
    def _forward_op(x: Tensor, weight: Tensor, bias: Optional[Tensor], eps: float,
                    rms: bool) -> Tuple[Tensor, Tensor, Tensor]:
        y, mean, rstd = _forward(x, weight, bias, eps, rms)
        return y, _custom_ops.empty_like_none(x) if mean is None else mean, rstd


def _call(x, weight, bias, eps: float, rms: bool):
    if _custom_ops.takes(x, weight, bias):
        return _forward_op(x, weight, bias, float(eps), bool(rms))[0]
    if wants_grad(x, weight, bias):
        return _NormFunction.apply(x, weight, bias, eps, rms)
    return _forward(x, weight, bias, eps, rms)[0]


def layer_norm(x, weight, bias=None, eps: float = 1e-5):
    """y = (x − mean) / sqrt(var + eps) · weight + bias over x's last dimension (1 to 65536
    columns; var biased), as torch.nn.functional.layer_norm. x, weight and bias ([cols]; None:
    zeros) of one dtype: float16, bfloat16 (torch) or float32. Differentiable for torch tensors
    (x, weight and bias). Returns y like x. With PyTorch 2.4 or later, torch tensors go through
    the custom operator flashjit::layer_norm_forward (rms_norm too), which torch.compile traces
    whole."""
    if bias is None:  # the kernels always add one
        bias = torch.zeros_like(weight) if is_torch(weight) else np.zeros_like(weight)
    return _call(x, weight, bias, eps, False)


def rms_norm(x, weight, eps: float = 1e-6):
    """y = x / sqrt(mean(x²) + eps) · weight over x's last dimension; dtypes and gradients as
    layer_norm."""
    return _call(x, weight, None, eps, True)
