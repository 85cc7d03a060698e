"""Dropout (attention(dropout_p=...)): the forward and its gradients against a float64
reference whose mask comes from a numpy Philox written here from docs/attention.md's text (so
the documented generator is the kernels' one, bit for bit); seeds drawn from torch's generator;
bad arguments named."""

import numpy as np
import pytest
import torch

import flashjit
import reference


def rand(*shape, seed=0, grad=False):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    return x.requires_grad_(grad)


@pytest.mark.parametrize("causal", [False, True])
def test_forward_and_gradients_match_float64_with_the_documented_mask(causal):
    q, k, v = rand(2, 33, 4, 64, seed=1, grad=True), rand(2, 47, 2, 64, seed=2, grad=True), \
        rand(2, 47, 2, 64, seed=3, grad=True)
    dropout = (0.3, 0x1234_5678_9ABC, (1 << 32) + 6)  # the offset's high word too
    o, lse = flashjit.attention(q, k, v, causal=causal, return_lse=True, dropout_p=dropout[0],
                                dropout_seed=dropout[1], dropout_offset=dropout[2])
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    o_ref, lse_ref = reference.attention(q64, k64, v64, causal=causal, dropout=dropout)
    assert reference.relative_error(o.detach(), o_ref) < 1e-2
    assert reference.relative_error(lse, lse_ref) < 1e-5  # the undropped softmax's
    # About 30 % of the probabilities are dropped: far from the undropped output.
    o_plain, _ = reference.attention(q64, k64, v64, causal=causal)
    assert reference.relative_error(o.detach(), o_plain) > 0.2
    dout = rand(*o.shape, seed=4)
    (o.float() * dout.float()).sum().backward()
    (o_ref * dout.double()).sum().backward()
    for got, ref in ((q, q64), (k, k64), (v, v64)):
        assert reference.relative_error(got.grad, ref.grad) < 2e-2
    # attention_backward with the forward's seed and offset gives autograd's bits.
    grads = flashjit.attention_backward(dout, q.detach(), k.detach(), v.detach(), o.detach(),
                                        lse, causal=causal, dropout_p=dropout[0],
                                        dropout_seed=dropout[1], dropout_offset=dropout[2])
    for got, ref in zip(grads, (q, k, v)):
        assert torch.equal(got, ref.grad)


def test_variable_lengths_drop_each_sequence_by_its_index():
    # Sequences of 9, 0 and 20 queries over 12, 5 and 31 keys, packed; b of the mask is the
    # sequence's index. Forward and gradients against float64 per sequence.
    lq, lk = [9, 0, 20], [12, 5, 31]
    cu_q = torch.tensor([0, 9, 9, 29], dtype=torch.int32)
    cu_k = torch.tensor([0, 12, 17, 48], dtype=torch.int32)
    q, k, v = rand(29, 4, 64, seed=8, grad=True), rand(48, 2, 64, seed=9, grad=True), \
        rand(48, 2, 64, seed=10, grad=True)
    dropout = (0.25, 21, 0)
    o = flashjit.attention_varlen(q, k, v, cu_q, cu_k, 20, 31, causal=True,
                                  dropout_p=dropout[0], dropout_seed=dropout[1])
    dout = rand(*o.shape, seed=11)
    (o.float() * dout.float()).sum().backward()
    for b in (0, 2):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        q64, k64, v64 = (x.detach()[s].double()[None].requires_grad_()
                         for x, s in ((q, qs), (k, ks), (v, ks)))
        o_ref, _ = reference.attention(q64, k64, v64, causal=True, dropout=dropout,
                                       first_batch=b)
        assert reference.relative_error(o.detach()[qs], o_ref[0]) < 1e-2
        (o_ref[0] * dout[qs].double()).sum().backward()
        for got, ref, s in ((q, q64, qs), (k, k64, ks), (v, v64, ks)):
            assert reference.relative_error(got.grad[s], ref.grad[0]) < 2e-2


def test_the_keep_rate_is_one_minus_p():
    for p in (0.1, 0.5, 0.8):
        factors = reference.dropout_factors(p, 99, 0, 2, 4, 128, 128)
        assert abs((factors > 0).mean() - (1 - p)) < 0.01


def test_seeds_come_from_torchs_generator_and_fix_the_mask():
    q, k, v = rand(1, 24, 2, 64, seed=5), rand(1, 24, 2, 64, seed=6), rand(1, 24, 2, 64, seed=7)
    torch.manual_seed(3)
    first = flashjit.attention(q, k, v, dropout_p=0.2)
    second = flashjit.attention(q, k, v, dropout_p=0.2)
    assert not torch.equal(first, second)  # a new draw each call
    torch.manual_seed(3)
    assert torch.equal(flashjit.attention(q, k, v, dropout_p=0.2), first)
    fixed = flashjit.attention(q, k, v, dropout_p=0.2, dropout_seed=11)
    assert torch.equal(fixed, flashjit.attention(q, k, v, dropout_p=0.2, dropout_seed=11))
    assert torch.equal(flashjit.attention(q, k, v, dropout_p=0.0),
                       flashjit.attention(q, k, v))
    # numpy arrays take it too (float16), with numpy's generator when no seed is given.
    qn, kn, vn = (x.float().numpy().astype(np.float16) for x in (q, k, v))
    np.random.seed(0)
    a = flashjit.attention(qn, kn, vn, dropout_p=0.2)
    np.random.seed(0)
    assert np.array_equal(a, flashjit.attention(qn, kn, vn, dropout_p=0.2))


def test_bad_dropout_arguments_are_named():
    q = rand(1, 8, 1, 64)
    for p in (1.0, -0.1, 2.0, float("nan")):
        with pytest.raises(ValueError, match="'dropout_p' must be in \\[0, 1\\)"):
            flashjit.attention(q, q, q, dropout_p=p, dropout_seed=1)
    with pytest.raises(ValueError, match="'dropout_seed' must be an int in \\[0, 2\\*\\*63\\)"):
        flashjit.attention(q, q, q, dropout_p=0.1, dropout_seed=-1)
    o, lse = flashjit.attention(q, q, q, return_lse=True)
    with pytest.raises(ValueError, match="'dropout_seed' must be the forward's"):
        flashjit.attention_backward(q, q, q, q, o, lse, dropout_p=0.1)
    # A paged cache is for inference: dropout there is named as the argument it came from.
    cache = rand(2, 16, 1, 64)
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    cu = torch.tensor([0, 8], dtype=torch.int32)
    with pytest.raises(ValueError, match="'dropout_p'.*not with pages"):
        flashjit.attention_varlen(q[0], cache, cache, cu, None, 8, 32, block_table=table,
                                  seqused_k=torch.tensor([32], dtype=torch.int32), dropout_p=0.1)


def test_learnable_sinks_with_dropout():
    # The sink pass rescales the dropped output like any other; the sinks' gradient
    # −Σ P_sink · rowsum(dO ∘ O) holds with O the dropped output.
    q, k, v = rand(1, 30, 4, 64, seed=12, grad=True), rand(1, 41, 2, 64, seed=13, grad=True), \
        rand(1, 41, 2, 64, seed=14, grad=True)
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0], requires_grad=True)
    dropout = (0.3, 8, 0)
    o, lse = flashjit.attention(q, k, v, causal=True, sinks=sinks, return_lse=True,
                                dropout_p=dropout[0], dropout_seed=dropout[1])
    dout = rand(*o.shape, seed=15)
    (o.float() * dout.float()).sum().backward()
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v, sinks)]
    o_ref, lse_ref = reference.attention(*leaves[:3], causal=True, sinks=leaves[3],
                                         dropout=dropout)
    (o_ref * dout.double()).sum().backward()
    assert reference.relative_error(o.detach(), o_ref) < 1e-2
    assert reference.relative_error(lse, lse_ref) < 1e-5
    for got, ref in zip((q, k, v, sinks), leaves):
        assert reference.relative_error(got.grad, ref.grad) < 2e-2
