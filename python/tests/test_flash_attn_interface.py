"""flashjit.flash_attn_interface: FlashAttention 2's call names and argument lists give the
flashjit calls' results, bit for bit (positional arguments in FlashAttention's order);
dropout_p is attention()'s (attention_varlen()'s) dropout; head dims that are not a multiple of 8 are padded."""

import pytest
import torch

import flashjit
import reference
from flashjit import flash_attn_interface as fa


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def test_dense_calls_in_flash_attentions_order():
    q, k, v = rand(2, 24, 4, 64, seed=1), rand(2, 40, 2, 64, seed=2), rand(2, 40, 2, 64, seed=3)
    # q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
    # deterministic, return_attn_probs
    o, lse, probs = fa.flash_attn_func(q, k, v, 0.0, 0.1, True, (16, 0), 0.0, None, True, True)
    o_ref, lse_ref = flashjit.attention(q, k, v, scale=0.1, causal=True, window=(16, 0),
                                        deterministic=True, return_lse=True)
    assert torch.equal(o, o_ref) and torch.equal(lse, lse_ref) and probs is None
    kv = torch.stack([k, v], dim=2)
    assert torch.equal(fa.flash_attn_kvpacked_func(q, kv, softmax_scale=0.1, causal=True,
                                                   window_size=(16, 0)), o_ref)
    qkv = torch.stack([q, q, q], dim=2)
    assert torch.equal(fa.flash_attn_qkvpacked_func(qkv, causal=True),
                       flashjit.attention(q, q, q, causal=True))
    # dropout_p: attention()'s, its seed from torch's generator (the same draw, the same bits).
    torch.manual_seed(5)
    dropped = fa.flash_attn_func(q, k, v, 0.1, causal=True)
    torch.manual_seed(5)
    assert torch.equal(dropped, flashjit.attention(q, k, v, causal=True, dropout_p=0.1))
    assert not torch.equal(dropped, fa.flash_attn_func(q, k, v, 0.1, causal=True))  # new draw
    cu = torch.tensor([0, 24], dtype=torch.int32)
    torch.manual_seed(6)
    packed = fa.flash_attn_varlen_func(q[0], k[0, :24], v[0, :24], cu, cu, 24, 24, 0.1)
    torch.manual_seed(6)
    assert torch.equal(packed, flashjit.attention_varlen(q[0], k[0, :24], v[0, :24], cu, cu, 24,
                                                         24, dropout_p=0.1))


def test_rows_without_keys_get_flash_attentions_lse():
    # Causal, bottom-right aligned: 40 queries over 24 keys, the first 16 rows see no key.
    q, k, v = rand(1, 40, 2, 64, seed=13), rand(1, 24, 2, 64, seed=14), rand(1, 24, 2, 64, seed=15)
    o, lse, _ = fa.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    o_ref, lse_ref = flashjit.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(o, o_ref) and torch.all(o[:, :16] == 0)
    assert torch.all(lse_ref[..., :16] == float("-inf"))  # flashjit's own convention
    assert torch.all(lse[..., :16] == float("inf"))       # FlashAttention's
    assert torch.equal(lse[..., 16:], lse_ref[..., 16:])
    _, lse_cache = fa.flash_attn_with_kvcache(q, k, v, causal=True, return_softmax_lse=True)
    assert torch.all(lse_cache[..., :16] == float("inf"))


def test_gradients_flow_through_flash_attn_func():
    q, k, v = (rand(1, 16, 2, 32, seed=s).requires_grad_() for s in (4, 5, 6))
    fa.flash_attn_func(q, k, v, causal=True, deterministic=True).float().sum().backward()
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    flashjit.attention(*leaves, causal=True, deterministic=True).float().sum().backward()
    for got, ref in zip((q, k, v), leaves):
        assert torch.equal(got.grad, ref.grad)


def test_varlen_calls():
    cu_q, cu_k = (torch.tensor(c, dtype=torch.int32) for c in ([0, 5, 12], [0, 9, 30]))
    q, k, v = rand(12, 4, 64, seed=7), rand(30, 2, 64, seed=8), rand(30, 2, 64, seed=9)
    alibi = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    o = fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 7, 21, 0.0, None, True, (-1, -1), 0.0,
                                  alibi)
    assert torch.equal(o, flashjit.attention_varlen(q, k, v, cu_q, cu_k, 7, 21, causal=True,
                                                    alibi_slopes=alibi))
    qkv = torch.stack([k, k, v], dim=1)
    assert torch.equal(fa.flash_attn_varlen_qkvpacked_func(qkv, cu_k, 21),
                       flashjit.attention_varlen(k, k, v, cu_k, cu_k, 21, 21))
    assert torch.equal(fa.flash_attn_varlen_kvpacked_func(q, qkv[:, 1:], cu_q, cu_k, 7, 21),
                       flashjit.attention_varlen(q, k, v, cu_q, cu_k, 7, 21))
    # FlashAttention's index tensors are int32; int64 ones are refused by name, saying so.
    with pytest.raises(ValueError, match="'cu_seqlens_q' has dtype torch.int64: index arrays "
                                         "must be int32"):
        fa.flash_attn_varlen_func(q, k, v, cu_q.long(), cu_k, 7, 21)


def test_with_kvcache_full_cache_by_default():
    q = rand(2, 1, 4, 64, seed=10)
    k_cache, v_cache = rand(2, 33, 2, 64, seed=11), rand(2, 33, 2, 64, seed=12)
    o, lse = fa.flash_attn_with_kvcache(q, k_cache, v_cache, return_softmax_lse=True)
    o_ref, lse_ref = flashjit.attention_with_kvcache(q, k_cache, v_cache, 33, return_lse=True)
    assert torch.equal(o, o_ref) and torch.equal(lse, lse_ref)
    with pytest.raises(ValueError, match="'cache_seqlens'"):
        fa.flash_attn_with_kvcache(q, k_cache, v_cache,
                                   block_table=torch.zeros(2, 1, dtype=torch.int32))
    # The library's errors name the call's arguments, not its Sequences fields.
    with pytest.raises(ValueError, match=r"invalid argument 'cache_seqlens.shape': is \[3\]"):
        fa.flash_attn_with_kvcache(q, k_cache, v_cache,
                                   cache_seqlens=torch.tensor([5, 6, 7], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"invalid argument 'window\[0\]'"):
        flashjit.attention(q, k_cache, v_cache, window=(-5, 0))


def test_head_dims_not_a_multiple_of_8_are_padded():
    # FlashAttention pads head dims in its wrapper; the result is attention at the caller's own
    # head dim (scale 1/sqrt(12)), checked against the float64 reference.
    q, k, v = (rand(1, 20, 2, 12, seed=s).requires_grad_() for s in (16, 17, 18))
    o = fa.flash_attn_func(q, k, v, causal=True)
    assert o.shape == (1, 20, 2, 12)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    o_ref, _ = reference.attention(*leaves, causal=True)
    assert reference.relative_error(o.detach(), o_ref.detach()) < 1e-2
    o_unmasked, _ = reference.attention(*(t.detach() for t in leaves))
    assert reference.relative_error(o.detach(), o_unmasked) > 5e-2  # the causal mask made a difference
    o.float().sum().backward()  # through the padding: gradients of the caller's shape
    o_ref.sum().backward()
    for got, ref in zip((q, k, v), leaves):
        assert got.grad.shape == ref.shape
        assert reference.relative_error(got.grad, ref.grad) < 2e-2
    # Packed and varlen forms pad alike; 20 columns pad to 24.
    qkv = torch.stack([rand(1, 9, 2, 20, seed=s) for s in (19, 20, 21)], dim=2)
    o_packed = fa.flash_attn_qkvpacked_func(qkv)
    assert o_packed.shape == (1, 9, 2, 20)
    assert torch.equal(o_packed, fa.flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]))
    cu = torch.tensor([0, 9], dtype=torch.int32)
    assert torch.equal(fa.flash_attn_varlen_qkvpacked_func(qkv[0], cu, 9), o_packed[0])
    with pytest.raises(ValueError, match="'q' has head dim 12, not a multiple of 8: "
                                         "flash_attn_with_kvcache writes into the cache"):
        fa.flash_attn_with_kvcache(q.detach(), k.detach(), v.detach())
