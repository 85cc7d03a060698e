"""flashjit.scaled_dot_product_attention: PyTorch's SDPA signature and [batch, heads, seqlen,
head_dim] layout, checked against a float64 SDPA written out here (is_causal aligned top-left,
boolean and additive masks broadcast, GQA behind enable_gqa, the additive mask's gradient)."""

import math

import pytest
import torch

import flashjit


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def sdpa64(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """PyTorch's SDPA in float64 from its definition (differentiable)."""
    q, k, v = (t.double() for t in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if is_causal:
        seen = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        s = s.masked_fill(~seen, float("-inf"))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        s = s.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        s = s + attn_mask.double()
    return torch.softmax(s, dim=-1) @ v


def close(got, expected, bound=2e-2):
    got, expected = got.detach().double(), expected.detach()
    return ((got - expected).norm() / expected.norm()).item() < bound


def test_layout_and_causal_alignment():
    q, k, v = rand(2, 4, 24, 64, seed=1), rand(2, 4, 24, 64, seed=2), rand(2, 4, 24, 64, seed=3)
    o = flashjit.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert o.shape == (2, 4, 24, 64)
    flash = flashjit.attention(*(t.transpose(1, 2).contiguous() for t in (q, k, v)), causal=True)
    assert torch.equal(o, flash.transpose(1, 2))  # square: flashjit's own causal mask
    assert close(o, sdpa64(q, k, v, is_causal=True))
    # 5 queries over 12 keys: PyTorch's is_causal lets query i see keys 0..i (top-left).
    q5 = rand(1, 2, 5, 32, seed=4)
    k12, v12 = rand(1, 2, 12, 32, seed=5), rand(1, 2, 12, 32, seed=6)
    o5 = flashjit.scaled_dot_product_attention(q5, k12, v12, is_causal=True, scale=0.3)
    assert close(o5, sdpa64(q5, k12, v12, is_causal=True, scale=0.3))
    assert not close(o5, sdpa64(q5, k12, v12, scale=0.3))  # the mask mattered


def test_masks_broadcast_and_the_additive_mask_gets_its_gradient():
    q, k, v = rand(2, 2, 16, 32, seed=7), rand(2, 2, 20, 32, seed=8), rand(2, 2, 20, 32, seed=9)
    keep = torch.rand(2, 1, 16, 20, generator=torch.Generator().manual_seed(10)) < 0.6
    keep[..., 0] = True  # every row sees a key
    o = flashjit.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert close(o, sdpa64(q, k, v, attn_mask=keep))
    bias = (torch.randn(16, 20, generator=torch.Generator().manual_seed(11))).requires_grad_()
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    o = flashjit.scaled_dot_product_attention(*leaves, attn_mask=bias)
    bias64 = bias.detach().double().requires_grad_()
    refs = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = sdpa64(*refs, attn_mask=bias64)
    assert close(o, expected)
    o.float().sum().backward()
    expected.sum().backward()
    assert close(bias.grad, bias64.grad)
    for got, ref in zip(leaves, refs):
        assert close(got.grad, ref.grad)


def test_gqa_needs_enable_gqa_and_bad_input_is_named():
    q, k, v = rand(1, 4, 8, 32, seed=12), rand(1, 2, 8, 32, seed=13), rand(1, 2, 8, 32, seed=14)
    with pytest.raises(ValueError, match="enable_gqa=True"):
        flashjit.scaled_dot_product_attention(q, k, v)
    o = flashjit.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert close(o, sdpa64(q, k, v))
    with pytest.raises(ValueError, match="'dropout_p' must be in \\[0, 1\\)"):
        flashjit.scaled_dot_product_attention(q, k, v, dropout_p=1.0, enable_gqa=True)
    with pytest.raises(ValueError, match="'attn_mask' and 'is_causal' are exclusive"):
        flashjit.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool),
                                              is_causal=True)
    with pytest.raises(ValueError, match="'attn_mask' has shape \\(3, 8, 8\\): its heads axis"):
        flashjit.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(3, 8, 8))
