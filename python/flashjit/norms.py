"""Layer norm and RMS norm over the last dimension, differentiable for torch tensors."""

import ctypes

from . import _capi
from ._arrays import Launch, dtype_name, is_torch

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _options(epsilon: float, rms: bool) -> _capi.LayerNormOptions:
    options = _capi.LayerNormOptions()
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


def _call(x, weight, bias, eps: float, rms: bool):
    if (torch is not None and torch.is_grad_enabled() and
            any(is_torch(t) and t.requires_grad for t in (x, weight, bias) if t is not None)):
        return _NormFunction.apply(x, weight, bias, eps, rms)
    return _forward(x, weight, bias, eps, rms)[0]


def layer_norm(x, weight, bias, eps: float = 1e-5):
    """y = (x − mean) / sqrt(var + eps) · weight + bias over x's last dimension (1 to 65536
    columns; var biased), as torch.nn.functional.layer_norm. x, weight and bias ([cols]) of one
    dtype: float16, bfloat16 (torch) or float32. Differentiable for torch tensors (x, weight
    and bias). Returns y like x."""
    return _call(x, weight, bias, eps, False)


def rms_norm(x, weight, eps: float = 1e-6):
    """y = x / sqrt(mean(x²) + eps) · weight over x's last dimension; dtypes and gradients as
    layer_norm."""
    return _call(x, weight, None, eps, True)
