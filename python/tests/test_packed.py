"""The packed-input calls (attention_qkvpacked, attention_kvpacked and their varlen forms): the
same bits as the unpacked call on the slices, and the packed array's gradient the slices'
gradients stacked; a badly shaped packed array is named."""

import numpy as np
import pytest
import torch

import flashjit


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def test_qkvpacked_is_attention_on_its_slices_with_gradients():
    qkv = rand(2, 40, 3, 4, 64, seed=1).requires_grad_()
    dout = rand(2, 40, 4, 64, seed=2)
    o = flashjit.attention_qkvpacked(qkv, causal=True, deterministic=True)
    o.backward(dout)
    leaves = [qkv.detach()[:, :, i].clone().requires_grad_() for i in range(3)]
    o_ref = flashjit.attention(*leaves, causal=True, deterministic=True)
    o_ref.backward(dout)
    assert torch.equal(o, o_ref)
    assert torch.equal(qkv.grad, torch.stack([t.grad for t in leaves], dim=2))


def test_kvpacked_numpy():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 24, 4, 32)).astype(np.float16)
    kv = rng.standard_normal((1, 30, 2, 2, 32)).astype(np.float16)
    o = flashjit.attention_kvpacked(q, kv, window=(8, 0))
    assert np.array_equal(o, flashjit.attention(q, kv[:, :, 0], kv[:, :, 1], window=(8, 0)))


def test_varlen_packed_forms():
    cu = torch.tensor([0, 7, 30], dtype=torch.int32)
    qkv = rand(30, 3, 2, 64, seed=4).requires_grad_()
    o = flashjit.attention_varlen_qkvpacked(qkv, cu, 23, causal=True, deterministic=True)
    o.float().square().sum().backward()
    leaves = [qkv.detach()[:, i].clone().requires_grad_() for i in range(3)]
    o_ref = flashjit.attention_varlen(*leaves, cu, cu, 23, 23, causal=True, deterministic=True)
    o_ref.float().square().sum().backward()
    assert torch.equal(o, o_ref)
    assert torch.equal(qkv.grad, torch.stack([t.grad for t in leaves], dim=1))
    cu_q = torch.tensor([0, 3, 5], dtype=torch.int32)
    q = rand(5, 2, 64, seed=5)
    o = flashjit.attention_varlen_kvpacked(q, qkv.detach()[:, 1:], cu_q, cu, 3, 23)
    assert torch.equal(o, flashjit.attention_varlen(q, leaves[1].detach(), leaves[2].detach(),
                                                    cu_q, cu, 3, 23))


def test_a_badly_packed_array_is_named():
    with pytest.raises(ValueError, match=r"'qkv' must be \[batch, seqlen, 3, heads, head_dim\]"):
        flashjit.attention_qkvpacked(rand(1, 8, 2, 4, 32))
    with pytest.raises(ValueError, match=r"'kv' must be \[total_k, 2, heads_kv, head_dim\]"):
        flashjit.attention_varlen_kvpacked(rand(8, 4, 32), rand(8, 4, 32),
                                           torch.tensor([0, 8], dtype=torch.int32),
                                           torch.tensor([0, 8], dtype=torch.int32), 8, 8)
