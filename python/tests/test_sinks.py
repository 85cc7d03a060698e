"""Learnable attention sinks (`sinks`, FlashAttention's `learnable_sink`) on the CPU emulator:
the forward and every gradient, the sinks' own included, against the float64 reference whose
denominators hold e^sink (its autograd is the exact gradient); numpy through
attention_backward; bf16 sinks used as float32 with the gradient flowing back; bad sinks
named."""

import numpy as np
import pytest
import torch

import flashjit
import reference
from flashjit.flash_attn_interface import flash_attn_func, flash_attn_varlen_func


def rand(*shape, dtype=torch.bfloat16, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def exact(t):
    return t.detach().double().requires_grad_()


@pytest.mark.parametrize("causal, sink_dtype", [(False, torch.float32), (True, torch.bfloat16)])
def test_forward_and_gradients_with_sinks(causal, sink_dtype):
    q = rand(2, 9, 4, 64, seed=1).requires_grad_()
    k, v = (rand(2, 13, 2, 64, seed=s).requires_grad_() for s in (2, 3))
    sinks = (rand(4, dtype=torch.float32, seed=4) * 2).to(sink_dtype).requires_grad_()
    o, lse = flashjit.attention(q, k, v, causal=causal, sinks=sinks, return_lse=True)
    dout = rand(*o.shape, seed=5)
    o.backward(dout)
    qx, kx, vx, sx = exact(q), exact(k), exact(v), exact(sinks)
    o_ref, lse_ref = reference.attention(qx, kx, vx, causal=causal, sinks=sx)
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < 2e-2
    assert reference.relative_error(lse, lse_ref) < 1e-4
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad)):
        assert reference.relative_error(got, ref) < 4e-2
    assert sinks.grad.dtype == sink_dtype
    assert reference.relative_error(sinks.grad, sx.grad) < 2e-2
    # Without the sinks the output differs: they were applied, not ignored.
    plain = flashjit.attention(q.detach(), k.detach(), v.detach(), causal=causal)
    assert reference.relative_error(plain, o_ref) > 5e-2


def test_numpy_forward_and_backward_with_sinks():
    rng = np.random.default_rng(6)
    q, k, v, dout = (rng.standard_normal((1, 16, 2, 32)).astype(np.float16) for _ in range(4))
    sinks = np.array([0.5, -1.0], dtype=np.float32)
    o, lse = flashjit.attention(q, k, v, causal=True, sinks=sinks, return_lse=True)
    dq, dk, dv, dsinks = flashjit.attention_backward(dout, q, k, v, o, lse, causal=True,
                                                     sinks=sinks)
    qx, kx, vx = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    sx = torch.tensor(sinks, dtype=torch.float64, requires_grad=True)
    o_ref, _ = reference.attention(qx, kx, vx, causal=True, sinks=sx)
    o_ref.backward(torch.tensor(dout, dtype=torch.float64))
    assert reference.relative_error(o, o_ref) < 2e-2
    assert dsinks.dtype == np.float32 and dsinks.shape == (2,)
    assert reference.relative_error(dsinks, sx.grad) < 2e-2
    assert reference.relative_error(dq, qx.grad) < 4e-2


def test_varlen_with_sinks_is_the_dense_call():
    # Full-length sequences packed back to back are the dense batch: the same o and gradients.
    q = rand(2, 9, 4, 64, seed=11).requires_grad_()
    k, v = (rand(2, 13, 2, 64, seed=s).requires_grad_() for s in (12, 13))
    sinks = rand(4, dtype=torch.float32, seed=14).requires_grad_()
    o = flashjit.attention(q, k, v, causal=True, sinks=sinks)
    o.square().sum().backward()
    dense = [t.grad.clone() for t in (q, k, v, sinks)]
    for t in (q, k, v, sinks):
        t.grad = None
    cu_q, cu_k = (torch.tensor([0, n, 2 * n], dtype=torch.int32) for n in (9, 13))
    o_packed = flashjit.attention_varlen(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_q,
                                         cu_k, 9, 13, causal=True, sinks=sinks)
    assert torch.equal(o_packed, o.detach().flatten(0, 1))
    o_packed.square().sum().backward()
    for got, want in zip((q.grad, k.grad, v.grad, sinks.grad), dense):
        assert reference.relative_error(got, want.float()) < 1e-2


def test_decoding_with_sinks_split_or_not():
    # Decoding against a cache with sinks: split-KV counts the sink once, after the merge.
    q = rand(2, 1, 4, 64, seed=15)
    k_cache, v_cache = (rand(2, 40, 2, 64, seed=s) for s in (16, 17))
    sinks = rand(4, dtype=torch.float32, seed=18)
    o_ref, lse_ref = reference.attention(q.double(), k_cache.double(), v_cache.double(),
                                         sinks=sinks)
    for splits in (1, 3):
        o, lse = flashjit.attention_with_kvcache(q, k_cache, v_cache, 40, num_splits=splits,
                                                 sinks=sinks, return_lse=True)
        assert reference.relative_error(o, o_ref) < 2e-2
        assert reference.relative_error(lse, lse_ref) < 1e-4


def test_flash_attn_func_takes_learnable_sink():
    q, k, v = (rand(1, 12, 4, 64, seed=s) for s in (7, 8, 9))
    sinks = rand(4, dtype=torch.float32, seed=10)
    o = flash_attn_func(q, k, v, causal=True, learnable_sink=sinks)
    assert torch.equal(o, flashjit.attention(q, k, v, causal=True, sinks=sinks))
    with pytest.raises(ValueError, match="'learnable_sink' must be"):
        flash_attn_func(q, k, v, learnable_sink=torch.zeros(3))
    cu = torch.tensor([0, 12], dtype=torch.int32)
    packed = flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 12, 12, causal=True,
                                    learnable_sink=sinks)
    assert torch.equal(packed, o[0])


def test_bad_sinks_are_named():
    q, k, v = (rand(1, 12, 4, 64, seed=s) for s in (7, 8, 9))
    with pytest.raises(ValueError, match="sinks"):
        flashjit.attention(q, k, v, sinks=torch.zeros(3))
    with pytest.raises(ValueError, match="sinks"):
        flashjit.attention(q, k, v, sinks=torch.zeros(2, 2))
