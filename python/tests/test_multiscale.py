"""multiscale_attention against the retention formula in float64, on the CPU emulator:
the decay and tensor masks, GQA, numpy and torch, gradients (the mask's included)."""

import numpy as np
import pytest
import torch

import flashjit
import reference


def rand(*shape, dtype=torch.bfloat16, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def exact(t, grad=False):
    return t.detach().double().requires_grad_(grad)


def test_decay_forward_and_gradients():
    gammas = torch.tensor([0.9, 0.97, 0.5, 1.0], dtype=torch.float32)
    q = rand(2, 40, 4, 64, seed=1).requires_grad_()
    k = rand(2, 50, 2, 64, seed=2).requires_grad_()
    v = rand(2, 50, 2, 64, seed=3).requires_grad_()
    o = flashjit.multiscale_attention(q, k, v, decay=gammas)
    dout = rand(*o.shape, seed=4)
    o.backward(dout)
    qx, kx, vx = exact(q, True), exact(k, True), exact(v, True)
    o_ref = reference.multiscale(qx, kx, vx, reference.decay_mask(gammas, 40, 50))
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < 3e-2
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad)):
        assert reference.relative_error(got, ref) < 6e-2


def test_tensor_mask_gradient_sums_over_the_batch():
    mask = torch.rand(2, 33, 33, generator=torch.Generator().manual_seed(5)).requires_grad_()
    q, k, v = (rand(3, 33, 2, 32, seed=s).requires_grad_() for s in (6, 7, 8))
    o = flashjit.multiscale_attention(q, k, v, mask=mask, scale=0.3)
    dout = rand(*o.shape, seed=9)
    o.backward(dout)
    qx, kx, vx, mx = exact(q, True), exact(k, True), exact(v, True), exact(mask, True)
    o_ref = reference.multiscale(qx, kx, vx, mx.unsqueeze(0), scale=0.3)
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < 3e-2
    assert mask.grad is not None and mask.grad.shape == mask.shape
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad), (mask.grad, mx.grad)):
        assert reference.relative_error(got, ref) < 6e-2


def test_numpy_float16():
    rng = np.random.default_rng(10)
    q, k, v = (rng.standard_normal((1, 24, 2, 16)).astype(np.float16) for _ in range(3))
    gammas = np.array([0.8, 0.95], dtype=np.float32)
    o = flashjit.multiscale_attention(q, k, v, decay=gammas)
    assert isinstance(o, np.ndarray) and o.dtype == np.float16
    o_ref = reference.multiscale(*(torch.as_tensor(x, dtype=torch.float64) for x in (q, k, v)),
                                 reference.decay_mask(gammas, 24, 24))
    assert reference.relative_error(o, o_ref) < 2e-2


@pytest.mark.parametrize("kwargs, named", [
    ({}, "decay"),
    ({"decay": torch.ones(2), "mask": torch.ones(2, 8, 8)}, "decay"),
    ({"decay": torch.ones(2, dtype=torch.float64)}, "decay"),
    ({"decay": torch.ones(2), "scale": -1.0}, "scale"),
    ({"decay": torch.ones(3)}, "decay"),
])
def test_bad_arguments_are_named(kwargs, named):
    q, k, v = (rand(1, 8, 2, 16, seed=s) for s in (11, 12, 13))
    with pytest.raises(ValueError, match=named):
        flashjit.multiscale_attention(q, k, v, **kwargs)
