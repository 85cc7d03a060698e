"""Python callables as score and mask modifiers, FlexAttention's signatures: FlexAttention's
own examples (relative bias, ALiBi, soft-capping, document masking, prefix LM, sliding window)
through the forward and backward against the float64 reference, the reference evaluating the
same callables on index tensors (so Python's meaning of // and % is what both follow); numbers
captured as values (new values, the same kernel); what the tracer refuses, by name."""

import math

import numpy as np
import pytest
import torch

import flashjit
import reference
from flashjit._trace import text_of

B, S, H, D = 2, 48, 4, 32


def qkv(seed, heads_kv=H, dtype=torch.float16):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, S, H, D, generator=g).to(dtype),
            *(torch.randn(B, S, heads_kv, D, generator=g).to(dtype) for _ in range(2)))


def flex_reference(q, k, v, score_mod=None, mask_mod=None):
    """FlexAttention's definition in float64: score_mod and mask_mod evaluated on broadcast
    index tensors [B, H, S, S], differentiable in q, k, v and whatever the callables read."""
    q, k, v = (x.double() if not x.requires_grad else x for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[3])
    b = torch.arange(q.shape[0])[:, None, None, None]
    h = torch.arange(q.shape[2])[None, :, None, None]
    i = torch.arange(q.shape[1])[None, None, :, None]
    j = torch.arange(k.shape[1])[None, None, None, :]
    if score_mod is not None:
        scores = score_mod(scores, b, h, i, j)
    if mask_mod is not None:
        scores = scores.masked_fill(~mask_mod(b, h, i, j).expand_as(scores), -math.inf)
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, dim=-1), v)


def check_forward_and_backward(score_mod, mask_mod, heads_kv=H, leaves=()):
    """flashjit's output and gradients (q, k, v and `leaves`, tensors the callables read that
    require grad) against flex_reference's."""
    q, k, v = (x.requires_grad_() for x in qkv(7, heads_kv))
    o = flashjit.attention(q, k, v, score_mod=score_mod, mask_mod=mask_mod)
    dout = torch.randn(o.shape, generator=torch.Generator().manual_seed(8)).to(o.dtype)
    o.backward(dout)
    grads = [x.grad for x in (q, k, v, *leaves)]
    for leaf in leaves:
        leaf.grad = None
    exact = [x.detach().double().requires_grad_() for x in (q, k, v)]
    o_ref = flex_reference(*exact, score_mod, mask_mod)
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < 5e-3
    for name, grad, expected in zip(("dq", "dk", "dv", "leaf"), grads,
                                    [x.grad for x in (*exact, *leaves)]):
        assert grad is not None and reference.relative_error(grad, expected) < 1e-2, name


SOFTCAP = 20.0
PREFIX = 10
WINDOW = 12


def relative_position(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.05


def soft_cap(score, b, h, q_idx, kv_idx):
    return SOFTCAP * torch.tanh(score / SOFTCAP)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def prefix_lm(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx) | (kv_idx < PREFIX)


def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx <= WINDOW)


SLOPES = torch.tensor([2.0 ** (-8 * (i + 1) / H) for i in range(H)])
DOCUMENTS = torch.tensor([[0] * 20 + [1] * 18 + [2] * 10, [0] * 7 + [1] * 41])  # int64


def alibi(score, b, h, q_idx, kv_idx):
    return score + SLOPES[h] * (kv_idx - q_idx)


def document(b, h, q_idx, kv_idx):
    return DOCUMENTS[b, q_idx] == DOCUMENTS[b, kv_idx]


@pytest.mark.parametrize("score_mod, mask_mod, heads_kv", [
    (relative_position, causal, H),
    (alibi, None, 2),
    (soft_cap, sliding_window, H),
    (None, document, 1),
    (relative_position, prefix_lm, 2),
], ids=["relative-causal", "alibi-gqa", "softcap-window", "document-mqa", "relative-prefix"])
def test_flex_attention_examples_as_callables(score_mod, mask_mod, heads_kv):
    check_forward_and_backward(score_mod, mask_mod, heads_kv)


def test_a_learnable_bias_table_read_by_a_callable_gets_its_gradient():
    table = (torch.randn(H, 2 * S - 1, generator=torch.Generator().manual_seed(3)) * 0.5)
    table.requires_grad_()

    def bias(score, b, h, q_idx, kv_idx):
        return score + table[h, q_idx - kv_idx + S - 1]

    check_forward_and_backward(bias, causal, leaves=(table,))


def test_floor_division_and_remainder_have_python_s_meaning():
    # Negative dividends and a negative divisor: Python floors and takes the divisor's sign,
    # C++ truncates; the reference evaluates the same callable with torch, which follows Python.
    def score_mod(score, b, h, q_idx, kv_idx):
        d = q_idx - kv_idx
        return score + (d // 5) * 0.03 + (d % 7) * 0.02 + (d // -3) * 0.01 + (kv_idx % -4) * 0.1

    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx) // 8 != -2

    check_forward_and_backward(score_mod, mask_mod)


def test_numbers_are_captured_values_so_new_values_reuse_the_kernel():
    def capped(cap):
        return lambda score, b, h, q_idx, kv_idx: cap * torch.tanh(score / cap)

    text, _ = text_of(capped(20.0))
    assert text == text_of(capped(5.0))[0] == "scalars[1] * tanh(score / scalars[0])"
    assert text_of(mask_mod=lambda b, h, q_idx, kv_idx: q_idx // 64 == kv_idx // 64)[1] == \
        "q_idx / int(scalars[0]) == kv_idx / int(scalars[1])"
    q, k, v = qkv(9)
    for cap in (20.0, 2.0):
        o = flashjit.attention(q, k, v, score_mod=capped(cap))
        expected = reference.attention(*(x.double() for x in (q, k, v)), softcap=cap)[0]
        assert reference.relative_error(o, expected) < 5e-3, cap


def test_four_tensors_fit_without_numbers_and_three_with_them():
    # The library's four captures: four tables when the callables use no Python number, three
    # beside the numbers' table when they do.
    q, k, v = qkv(11)
    tables = [torch.linspace(-0.5, 0.5, H) * (t + 1) for t in range(4)]

    def four(s, b, h, i, j):
        return s + tables[0][h] - tables[1][h] + tables[2][h] - tables[3][h]
    o = flashjit.attention(q, k, v, score_mod=four)
    assert reference.relative_error(o, flex_reference(q, k, v, four)) < 5e-3
    with pytest.raises(ValueError, match="score_mod.*reads 4 tensors and Python numbers"):
        flashjit.attention(q, k, v, score_mod=lambda s, b, h, i, j: four(s, b, h, i, j) * 0.5)


def test_what_the_language_cannot_express_is_refused_by_name():
    q, k, v = qkv(10)
    table = torch.randn(H, S)
    refused = [
        (lambda s, b, h, i, j: s if i > j else 0.0, "score_mod.*Python if.*torch.where"),
        (lambda s, b, h, i, j: math.exp(s), "score_mod.*math function.*torch.exp"),
        (lambda s, b, h, i, j: s // 2, "score_mod.*'//' on a float"),
        (lambda s, b, h, i, j: s + table[h], "score_mod.*indexed in 1 of its 2 dimensions"),
        (lambda s, b, h, i, j: torch.erf(s), "score_mod.*torch.erf has no counterpart"),
        (lambda s, b, h, i, j: s + table, "score_mod.*shape \\(4, 48\\) is used whole"),
        (lambda s, b, h, i, j: s + [0.0, 1.0][i], "score_mod.*index a torch tensor"),
        (lambda s, b, h: s, "'score_mod' must take the arguments \\(score, b, h, q_idx"),
        (lambda s, b, h, i, j: s + s.int() % 2, "score_mod.*int\\(\\) of 'score'.*derivative"),
    ]
    for score_mod, message in refused:
        with pytest.raises(ValueError, match=message):
            flashjit.attention(q, k, v, score_mod=score_mod)
    with pytest.raises(ValueError, match="mask_mod.*must return a boolean"):
        flashjit.attention(q, k, v, mask_mod=lambda b, h, i, j: i - j)
    with pytest.raises(ValueError, match="'captures' names the tensors of modifiers given as"):
        flashjit.attention(q, k, v, mask_mod=causal, captures={"t": table})


def test_a_block_mask_from_a_callable_skips_blocks_with_the_same_bits():
    q, k, v = (x.to(torch.bfloat16) for x in qkv(11))
    block_mask = flashjit.build_block_mask(document, B, H, S, S, like=q)
    plain = flashjit.attention(q, k, v, mask_mod=document)
    assert torch.equal(plain, flashjit.attention(q, k, v, mask_mod=document,
                                                 block_mask=block_mask))
    assert block_mask[0, 0, 0].tolist()[:2] == [0, 32]  # rows 0-15: keys 0-19, in 16-key tiles


def test_numpy_callers_may_use_callables_that_read_no_tensor():
    q, k, v = (x.numpy() for x in qkv(12))
    o = flashjit.attention(q, k, v, score_mod=relative_position, mask_mod=causal)
    expected = flex_reference(*(torch.tensor(x) for x in (q, k, v)), relative_position, causal)
    assert isinstance(o, np.ndarray)
    assert reference.relative_error(o, expected) < 5e-3


RELATIVE_NP = np.linspace(-1.0, 1.0, 2 * S - 1)  # float64: a global numpy table


def test_callables_may_index_numpy_arrays_of_their_closure_and_globals():
    # Numpy arrays (float64 and int64 here) become captures as torch tensors do, given back in
    # the call's kind: numpy for a numpy call, torch for a torch one.
    documents = (np.arange(S) // 13).astype(np.int64)

    def score_mod(s, b, h, i, j):
        return s + RELATIVE_NP[i - j + S - 1]

    def mask_mod(b, h, i, j):
        return documents[i] == documents[j]
    as_torch = (lambda s, b, h, i, j: s + torch.from_numpy(RELATIVE_NP)[i - j + S - 1],
                lambda b, h, i, j: torch.from_numpy(documents)[i] == torch.from_numpy(documents)[j])
    q, k, v = qkv(12)
    expected = flex_reference(q, k, v, *as_torch)
    o = flashjit.attention(q, k, v, score_mod=score_mod, mask_mod=mask_mod)
    assert reference.relative_error(o, expected) < 5e-3
    o_numpy = flashjit.attention(q.numpy(), k.numpy(), v.numpy(), score_mod=score_mod,
                                 mask_mod=mask_mod)
    assert isinstance(o_numpy, np.ndarray)
    assert reference.relative_error(o_numpy, expected) < 5e-3


def test_variable_length_calls_take_callables_as_their_text():
    # Packed sequences of 20 and 28 tokens, a per-sequence mask: the callable's result matches
    # the same modifier written as text.
    q, k, v = (x.reshape(B * S, -1, D) for x in qkv(13))
    cu = torch.tensor([0, 20, 2 * S], dtype=torch.int32)
    text = flashjit.attention_varlen(q, k, v, cu, cu, 2 * S - 20, 2 * S - 20,
                                     mask_mod="kv_idx <= q_idx && (q_idx - kv_idx) / 4 != 1")
    traced = flashjit.attention_varlen(
        q, k, v, cu, cu, 2 * S - 20, 2 * S - 20,
        mask_mod=lambda b, h, q_idx, kv_idx: (kv_idx <= q_idx) & ((q_idx - kv_idx) // 4 != 1))
    assert torch.equal(traced, text)


def test_variable_length_calls_give_a_captured_table_its_gradient():
    # Sequences of 20 and 76 tokens packed: the table's gradient (and q's) equal the sum of the
    # dense calls' over each sequence alone.
    table = (0.3 * torch.randn(H, 2 * 96 - 1, generator=torch.Generator().manual_seed(14)))
    table.requires_grad_()

    def bias(score, b, h, q_idx, kv_idx):
        return score + table[h, q_idx - kv_idx + 95]

    q, k, v = (x.reshape(B * S, H, D).requires_grad_() for x in qkv(15))
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(16)).to(q.dtype)
    cu = torch.tensor([0, 20, 96], dtype=torch.int32)
    flashjit.attention_varlen(q, k, v, cu, cu, 76, 76, score_mod=bias).backward(dout)
    packed_grads = (table.grad.clone(), q.grad.clone())
    table.grad, q.grad = None, None
    for start, end in ((0, 20), (20, 96)):
        rows = slice(start, end)
        o = flashjit.attention(q[None, rows], k[None, rows], v[None, rows], score_mod=bias)
        o.backward(dout[None, rows])
    assert reference.relative_error(packed_grads[0], table.grad) < 1e-2
    assert reference.relative_error(packed_grads[1].float(), q.grad.float()) < 1e-2
