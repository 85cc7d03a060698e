"""alibi_slopes (FlashAttention's ALiBi) in attention, attention_varlen and
attention_with_kvcache against the float64 reference's bias −slope · |i + sk − sq − j|, on the
CPU emulator: forward and gradients, per-head and per-sequence slopes, causal and not, varying
lengths, left pads and appends; bad slopes named."""

import numpy as np
import pytest
import torch

import flashjit
import reference


def rand(*shape, dtype=torch.bfloat16, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def exact(t, grad=False):
    return t.detach().double().requires_grad_(grad)


def slopes(*shape, seed=0):
    """ALiBi's slopes are small positive numbers (2^-1 ... 2^-8 for eight heads)."""
    return (torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 0.5 + 0.05)


@pytest.mark.parametrize("causal, per_sequence, softcap", [(False, False, 0.0),
                                                           (True, True, 0.0),
                                                           (True, False, 20.0)])
def test_dense_forward_and_gradients(causal, per_sequence, softcap):
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, d = 2, 20, 33, 4, 2, 64
    q = rand(batch, seqlen_q, heads_q, d, seed=1).requires_grad_()
    k = rand(batch, seqlen_k, heads_kv, d, seed=2).requires_grad_()
    v = rand(batch, seqlen_k, heads_kv, d, seed=3).requires_grad_()
    alibi = slopes(batch, heads_q, seed=4) if per_sequence else slopes(heads_q, seed=4)
    o, lse = flashjit.attention(q, k, v, causal=causal, softcap=softcap, alibi_slopes=alibi,
                                return_lse=True)
    dout = rand(*o.shape, seed=5)
    o.backward(dout)
    qx, kx, vx = exact(q, True), exact(k, True), exact(v, True)
    o_ref, lse_ref = reference.attention(qx, kx, vx, causal=causal, softcap=softcap,
                                         alibi_slopes=alibi)
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < 2e-2
    assert reference.relative_error(lse, lse_ref) < 1e-4
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad)):
        assert reference.relative_error(got, ref) < 4e-2
    # Without the slopes the output differs: the bias was applied, not ignored.
    plain = flashjit.attention(q.detach(), k.detach(), v.detach(), causal=causal, softcap=softcap)
    assert reference.relative_error(plain, o_ref) > 5e-2


def test_numpy_forward_and_backward():
    rng = np.random.default_rng(6)
    q, k, v, dout = (rng.standard_normal((1, n, 2, 32)).astype(np.float16)
                     for n in (24, 24, 24, 24))
    alibi = np.array([0.25, 0.0625], dtype=np.float32)
    o, lse = flashjit.attention(q, k, v, causal=True, alibi_slopes=alibi, return_lse=True)
    dq, dk, dv = flashjit.attention_backward(dout, q, k, v, o, lse, causal=True,
                                             alibi_slopes=alibi)
    leaves = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v)]
    o_ref, _ = reference.attention(*leaves, causal=True, alibi_slopes=alibi)
    o_ref.backward(torch.tensor(dout, dtype=torch.float64))
    assert reference.relative_error(o, o_ref) < 5e-3
    for got, leaf in zip((dq, dk, dv), leaves):
        assert reference.relative_error(got, leaf.grad) < 1e-2


def test_varlen_uses_each_sequences_own_offset():
    lengths_q, lengths_k, used_k = [5, 17, 12], [9, 30, 12], [9, 21, 12]
    cu_q = torch.tensor(np.cumsum([0] + lengths_q), dtype=torch.int32)
    cu_k = torch.tensor(np.cumsum([0] + lengths_k), dtype=torch.int32)
    seqused_k = torch.tensor(used_k, dtype=torch.int32)
    q = rand(sum(lengths_q), 4, 64, seed=7).requires_grad_()
    k = rand(sum(lengths_k), 2, 64, seed=8).requires_grad_()
    v = rand(sum(lengths_k), 2, 64, seed=9).requires_grad_()
    alibi = slopes(3, 4, seed=10)
    o = flashjit.attention_varlen(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k),
                                  causal=True, alibi_slopes=alibi, seqused_k=seqused_k)
    dout = rand(*o.shape, seed=11)
    o.backward(dout)
    qx, kx, vx = exact(q, True), exact(k, True), exact(v, True)
    pieces = []
    for i in range(3):
        rows = slice(int(cu_q[i]), int(cu_q[i + 1]))
        keys = slice(int(cu_k[i]), int(cu_k[i]) + used_k[i])
        o_i, _ = reference.attention(qx[rows][None], kx[keys][None], vx[keys][None], causal=True,
                                     alibi_slopes=alibi[i])
        pieces.append(o_i[0])
    o_ref = torch.cat(pieces)
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < 2e-2
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad)):
        assert reference.relative_error(got, ref) < 4e-2


@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_decoding_with_left_pads_and_an_append(causal):
    batch, heads_q, heads_kv, d, capacity, seqlen_q = 2, 4, 2, 64, 40, 3
    q = rand(batch, seqlen_q, heads_q, d, seed=12)
    k_cache, v_cache = rand(batch, capacity, heads_kv, d, seed=13), rand(batch, capacity,
                                                                          heads_kv, d, seed=14)
    k_new, v_new = (rand(batch, seqlen_q, heads_kv, d, seed=s) for s in (15, 16))
    pads = torch.tensor([0, 6], dtype=torch.int32)
    seqlens = torch.tensor([11, 29], dtype=torch.int32)  # counted from the row's start
    alibi = slopes(heads_q, seed=17)
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, k=k_new, v=v_new,
                                        cache_leftpad=pads, causal=causal, alibi_slopes=alibi)
    for i in range(batch):
        keys = slice(int(pads[i]), int(seqlens[i]) + seqlen_q)
        o_ref, _ = reference.attention(exact(q[i:i + 1]), exact(k_cache[i, keys][None]),
                                       exact(v_cache[i, keys][None]), causal=causal,
                                       alibi_slopes=alibi)
        assert reference.relative_error(o[i:i + 1], o_ref) < 2e-2


def test_bad_slopes_are_named():
    q, k = rand(1, 8, 4, 32), rand(1, 8, 2, 32)
    with pytest.raises(ValueError, match=r"'alibi_slopes' must be \[heads_q\] = \[4\]"):
        flashjit.attention(q, k, k, alibi_slopes=slopes(2))
    with pytest.raises(ValueError, match="'alibi_slopes' and 'score_mod'"):
        flashjit.attention(q, k, k, alibi_slopes=slopes(4), score_mod="score * 2.0f")
    with pytest.raises(ValueError, match="'captures'"):
        flashjit.attention(q, k, k, alibi_slopes=slopes(4), mask_mod="alibi_slopes[h] > 0.0f",
                           captures={"alibi_slopes": slopes(4)})
    with pytest.raises(TypeError, match="'alibi_slopes' must be a numpy array or a torch"):
        flashjit.attention(q, k, k, alibi_slopes=[0.5] * 4)
    cu = torch.tensor([0, 8], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"\[batch, heads_q\] = \[1, 4\]"):
        flashjit.attention_varlen(q[0], k[0], k[0], cu, cu, 8, 8, alibi_slopes=slopes(2, 4))
