"""flashjit.attention and attention_backward against the float64 reference, with numpy arrays
and torch tensors in host memory (the CPU emulator), and the errors bad arguments raise."""

import numpy as np
import pytest
import torch

import flashjit
import reference

# Relative L2 error bars: a few times what the kernels' rounding gives on these inputs (fp16
# outputs ~1e-3, bf16 ~8e-3); a wrong mask, head or transposition gives errors near 1.
BAR = {np.float16: 5e-3, torch.float16: 5e-3, torch.bfloat16: 3e-2}


def inputs(b, sq, sk, hq, hk, d, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, sq, hq, d))
    k = rng.standard_normal((b, sk, hk, d))
    v = rng.standard_normal((b, sk, hk, d))
    return q, k, v


CASES = [
    dict(shape=(2, 65, 80, 4, 2, 64)),
    dict(shape=(1, 33, 33, 2, 2, 128), causal=True),
    dict(shape=(1, 40, 100, 4, 1, 64), window=(16, 8)),
    dict(shape=(1, 50, 50, 2, 2, 96), softcap=5.0, scale=0.2),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c))
def test_numpy_forward_and_backward(case):
    options = {key: value for key, value in case.items() if key != "shape"}
    q, k, v = (x.astype(np.float16) for x in inputs(*case["shape"]))
    o, lse = flashjit.attention(q, k, v, return_lse=True, **options)
    assert isinstance(o, np.ndarray) and o.dtype == np.float16 and o.shape == q.shape
    assert lse.dtype == np.float32 and lse.shape == (q.shape[0], q.shape[2], q.shape[1])
    qt, kt, vt = (torch.tensor(x.astype(np.float64), requires_grad=True) for x in (q, k, v))
    o_ref, lse_ref = reference.attention(qt, kt, vt, **options)
    assert reference.relative_error(o, o_ref) < BAR[np.float16]
    assert reference.relative_error(lse, lse_ref) < 1e-4

    dout = np.random.default_rng(1).standard_normal(q.shape).astype(np.float16)
    dq, dk, dv = flashjit.attention_backward(dout, q, k, v, o, lse, **options)
    o_ref.backward(torch.tensor(dout.astype(np.float64)))
    for name, grad, expected in (("dq", dq, qt.grad), ("dk", dk, kt.grad), ("dv", dv, vt.grad)):
        assert grad.dtype == np.float16 and grad.shape == expected.shape, name
        assert reference.relative_error(grad, expected) < 2 * BAR[np.float16], name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("deterministic", [False, True])
def test_torch_autograd(dtype, deterministic):
    q, k, v = inputs(2, 70, 90, 4, 2, 64, seed=2)
    leaves = [torch.tensor(x, dtype=dtype, requires_grad=True) for x in (q, k, v)]
    o = flashjit.attention(*leaves, causal=True, deterministic=deterministic)
    assert o.dtype == dtype and o.requires_grad
    dout = torch.randn(o.shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    o.backward(dout)

    exact = [torch.tensor(x.float().numpy(), dtype=torch.float64, requires_grad=True)
             for x in [t.detach() for t in leaves]]
    o_ref, _ = reference.attention(*exact, causal=True)
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < BAR[dtype]
    for leaf, ref in zip(leaves, exact):
        assert leaf.grad.dtype == dtype
        assert reference.relative_error(leaf.grad, ref.grad) < 2 * BAR[dtype]
    if deterministic:  # the same bits again
        again = [t.detach().clone().requires_grad_() for t in leaves]
        flashjit.attention(*again, causal=True, deterministic=True).backward(dout)
        for first, second in zip(leaves, again):
            assert torch.equal(first.grad, second.grad)


def test_a_narrower_value_head_dim_mla():
    """v and o 32 wide under q and k of 64 (MLA's shape, small): forward and gradients, numpy
    and torch; a v wider than q is named."""
    q, k, _ = inputs(1, 40, 56, 4, 2, 64, seed=4)
    v = np.random.default_rng(5).standard_normal((1, 56, 2, 32))
    qh, kh, vh = (x.astype(np.float16) for x in (q, k, v))
    o = flashjit.attention(qh, kh, vh, causal=True)
    assert o.shape == (1, 40, 4, 32)
    exact = [torch.tensor(x.astype(np.float64), requires_grad=True) for x in (qh, kh, vh)]
    o_ref, _ = reference.attention(*exact, causal=True)
    assert reference.relative_error(o, o_ref) < BAR[np.float16]
    leaves = [torch.tensor(x, dtype=torch.bfloat16, requires_grad=True) for x in (q, k, v)]
    dout = torch.randn((1, 40, 4, 32), generator=torch.Generator().manual_seed(6))
    flashjit.attention(*leaves, causal=True).backward(dout.to(torch.bfloat16))
    exact = [torch.tensor(t.detach().float().numpy(), dtype=torch.float64, requires_grad=True)
             for t in leaves]
    reference.attention(*exact, causal=True)[0].backward(dout.double())
    for leaf, ref in zip(leaves, exact):
        assert leaf.grad.shape == ref.shape
        assert reference.relative_error(leaf.grad, ref.grad) < 2 * BAR[torch.bfloat16]
    wide = np.zeros((1, 56, 2, 72), dtype=np.float16)
    with pytest.raises(ValueError, match="head_dim_v"):
        flashjit.attention(qh, kh, wide)
    # Packed sequences (flash_attn_varlen_func's MLA prefill): each against its own reference.
    cu = np.array([0, 25, 40], dtype=np.int32)
    o = flashjit.attention_varlen(qh[0], kh[0, :40], vh[0, :40], cu, cu, 25, 25, causal=True)
    assert o.shape == (40, 4, 32)
    for start, end in ((0, 25), (25, 40)):
        expected, _ = reference.attention(*(x[:, start:end] for x in (qh, kh, vh)), causal=True)
        assert reference.relative_error(o[start:end], expected[0]) < BAR[np.float16]


def test_torch_strided_inputs_and_no_grad():
    q, k, v = (torch.tensor(x, dtype=torch.bfloat16) for x in inputs(1, 40, 40, 2, 2, 64, 4))
    # [b, h, s, d] memory seen as [b, s, h, d]: the same values, other strides
    q_strided = q.transpose(1, 2).contiguous().transpose(1, 2)
    assert not q_strided.is_contiguous()
    with torch.no_grad():
        assert torch.equal(flashjit.attention(q_strided, k, v), flashjit.attention(q, k, v))
    o = flashjit.attention(q, k, v)  # no input requires grad: no graph
    assert not o.requires_grad


def test_bad_arguments_are_named():
    q, k, v = (x.astype(np.float16) for x in inputs(1, 16, 16, 2, 2, 64))
    with pytest.raises(ValueError, match="'q' has dtype float64"):
        flashjit.attention(q.astype(np.float64), k, v)
    with pytest.raises(ValueError, match="'k.dtype'"):
        flashjit.attention(q, k.astype(np.float32), v)
    with pytest.raises(ValueError, match=r"'q' must be \[batch, seqlen, heads, head_dim\]"):
        flashjit.attention(q[0], k, v)
    with pytest.raises(ValueError, match="'k' is a torch tensor"):
        flashjit.attention(q, torch.tensor(k), v)
    with pytest.raises(ValueError, match="head_dim"):
        flashjit.attention(q[..., :12], k[..., :12], v[..., :12])
    with pytest.raises(ValueError, match="'scale'"):
        flashjit.attention(q, k, v, scale=-1.0)
    with pytest.raises(ValueError, match="'window'"):
        flashjit.attention(q, k, v, window=(1, 2, 3))
    with pytest.raises(TypeError, match="'q' must be a numpy array or a torch tensor"):
        flashjit.attention(q.tolist(), k, v)
    with pytest.raises(ValueError, match="heads"):
        flashjit.attention(q, k[:, :, :1].repeat(3, axis=2), v[:, :, :1].repeat(3, axis=2))


def test_score_and_mask_modifiers_in_the_forward():
    g = torch.Generator().manual_seed(41)
    q, k, v = (torch.randn(2, 48, 4, 64, generator=g).to(torch.bfloat16) for _ in range(3))
    o = flashjit.attention(q, k, v, score_mod="score - 0.25f * h * (q_idx - kv_idx)",
                           mask_mod="kv_idx <= q_idx && q_idx / 16 == kv_idx / 16")
    qx, kx, vx = (t.double() for t in (q, k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", qx, kx) / 8.0
    i = torch.arange(48)[:, None]
    j = torch.arange(48)[None, :]
    h = torch.arange(4)[:, None, None].double()
    s = s - 0.25 * h * (i - j)
    s = s.masked_fill(~((j <= i) & (i // 16 == j // 16)), float("-inf"))
    o_ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vx)
    assert reference.relative_error(o, o_ref) < 2e-2
    with pytest.raises(ValueError, match="attention.score_mod"):
        flashjit.attention(q, k, v, score_mod="score; 0")


@pytest.mark.parametrize("deterministic", [False, True])
def test_gradients_through_score_and_mask_modifiers(deterministic):
    # A soft cap written as a modifier (its slope from the kernels' dual numbers), a bias per
    # head, and a causal mask of 16-token documents; torch's float64 autograd is the reference.
    q, k, v = inputs(2, 40, 40, 4, 2, 64, seed=5)
    leaves = [torch.tensor(x, dtype=torch.float16, requires_grad=True) for x in (q, k, v)]
    score_mod = "3.0f * tanhf(score / 3.0f) - 0.25f * h * (q_idx - kv_idx)"
    mask_mod = "kv_idx <= q_idx && q_idx / 16 == kv_idx / 16"
    o = flashjit.attention(*leaves, score_mod=score_mod, mask_mod=mask_mod, scale=0.5,
                           deterministic=deterministic)
    dout = torch.randn(o.shape, generator=torch.Generator().manual_seed(6)).to(torch.float16)
    o.backward(dout)

    exact = [t.detach().double().requires_grad_() for t in leaves]
    qx, kx, vx = exact[0], exact[1].repeat_interleave(2, 2), exact[2].repeat_interleave(2, 2)
    s = torch.einsum("bqhd,bkhd->bhqk", qx, kx) * 0.5
    i = torch.arange(40)[:, None]
    j = torch.arange(40)[None, :]
    h = torch.arange(4)[:, None, None].double()
    s = 3.0 * torch.tanh(s / 3.0) - 0.25 * h * (i - j)
    s = s.masked_fill(~((j <= i) & (i // 16 == j // 16)), float("-inf"))
    o_ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vx)
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < BAR[torch.float16]
    for name, leaf, ref in zip("qkv", leaves, exact):
        assert reference.relative_error(leaf.grad, ref.grad) < 2 * BAR[torch.float16], name
    # numpy callers: attention_backward with the same modifiers gives the same gradients
    arrays = [t.detach().numpy() for t in leaves]
    o_np, lse_np = flashjit.attention(*arrays, score_mod=score_mod, mask_mod=mask_mod, scale=0.5,
                                      return_lse=True)
    grads = flashjit.attention_backward(dout.numpy(), *arrays, o_np, lse_np, scale=0.5,
                                        score_mod=score_mod, mask_mod=mask_mod,
                                        deterministic=deterministic)
    for grad, leaf in zip(grads, leaves):
        assert reference.relative_error(grad, leaf.grad) < 1e-3


def test_a_block_mask_gives_the_same_output_and_gradients():
    g = torch.Generator().manual_seed(42)
    q, k, v = (torch.randn(1, 128, 2, 64, generator=g).to(torch.bfloat16) for _ in range(3))
    mask_mod = "q_idx / 32 == kv_idx / 32"
    block_mask = flashjit.build_block_mask(mask_mod, 1, 2, 128, 128, like=q)
    assert block_mask.shape == (1, 2, 8, 4) and block_mask.dtype == torch.int32
    assert block_mask[0, 0, 5].tolist() == [64, 96, 64, 96]  # rows 80-95: document 2's keys
    plain = flashjit.attention(q, k, v, mask_mod=mask_mod)
    skipping = flashjit.attention(q, k, v, mask_mod=mask_mod, block_mask=block_mask)
    assert torch.equal(plain, skipping)
    # Under autograd the backward takes it too: the same gradients' bits.
    dout = torch.randn(1, 128, 2, 64, generator=g).to(torch.bfloat16)
    grads = []
    for mask in (None, block_mask):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        flashjit.attention(*leaves, mask_mod=mask_mod, block_mask=mask).backward(dout)
        grads.append([leaf.grad for leaf in leaves])
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    with pytest.raises(ValueError, match="block_mask"):
        flashjit.attention(q, k, v, block_mask=block_mask)
    with pytest.raises(ValueError, match="block_mask"):
        flashjit.attention(q, k, v, mask_mod=mask_mod, block_mask=block_mask[:, :1])


def test_captured_tensors_in_the_forward_and_backward():
    # A relative-position bias per head from a table and document ids per batch entry, read by
    # name; numpy and torch, the gradients of q, k, v through them.
    b, s, hq, d = 2, 40, 2, 64
    rng = np.random.default_rng(9)
    bias = (rng.standard_normal((hq, 2 * s - 1)) * 0.5).astype(np.float32)
    doc = np.stack([np.arange(s) // 13, np.arange(s) // 17]).astype(np.int32)
    score_mod = "score + bias[h][q_idx - kv_idx + 39]"
    mask_mod = "doc[b][q_idx] == doc[b][kv_idx]"
    q, k, v = inputs(b, s, s, hq, hq, d, seed=10)
    leaves = [torch.tensor(x, dtype=torch.float16, requires_grad=True) for x in (q, k, v)]
    captures = {"bias": torch.tensor(bias), "doc": torch.tensor(doc)}
    o = flashjit.attention(*leaves, score_mod=score_mod, mask_mod=mask_mod, captures=captures)
    dout = torch.randn(o.shape, generator=torch.Generator().manual_seed(11)).to(torch.float16)
    o.backward(dout)

    exact = [t.detach().double().requires_grad_() for t in leaves]
    scores = torch.einsum("bqhd,bkhd->bhqk", exact[0], exact[1]) / 8.0
    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    scores = scores + torch.tensor(bias, dtype=torch.float64)[:, i - j + s - 1][None]
    same = torch.tensor(doc)[:, :, None] == torch.tensor(doc)[:, None, :]  # [b, q, k]
    scores = scores.masked_fill(~same[:, None], float("-inf"))
    o_ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, dim=-1), exact[2])
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < BAR[torch.float16]
    for name, leaf, ref in zip("qkv", leaves, exact):
        assert reference.relative_error(leaf.grad, ref.grad) < 2 * BAR[torch.float16], name

    arrays = [t.detach().numpy() for t in leaves]
    o_np = flashjit.attention(*arrays, score_mod=score_mod, mask_mod=mask_mod,
                              captures={"bias": bias, "doc": doc})
    assert reference.relative_error(o_np, o.detach()) < 1e-3
    block_mask = flashjit.build_block_mask(mask_mod, b, hq, s, s, like=arrays[0],
                                           captures={"doc": doc})
    skipping = flashjit.attention(*arrays, score_mod=score_mod, mask_mod=mask_mod,
                                  captures={"bias": bias, "doc": doc}, block_mask=block_mask)
    assert np.array_equal(skipping, o_np)
    with pytest.raises(ValueError, match="no capture is named 'doc'"):
        flashjit.attention(*arrays, mask_mod=mask_mod, captures={"bias": bias})
    with pytest.raises(ValueError, match="captures.doc"):
        flashjit.attention(*arrays, mask_mod=mask_mod, captures={"doc": torch.tensor(doc)})
    with pytest.raises(TypeError, match="'captures'"):
        flashjit.attention(*arrays, mask_mod=mask_mod, captures=[doc])


def test_a_learnable_bias_table_gets_its_gradient():
    # score + bias[h][q_idx - kv_idx + 31]: torch's float64 autograd is the reference for the
    # table's gradient as for q, k and v.
    b, s, h, d = 1, 32, 2, 32
    q, k, v = inputs(b, s, s, h, h, d, seed=12)
    leaves = [torch.tensor(x, dtype=torch.float16, requires_grad=True) for x in (q, k, v)]
    table = np.random.default_rng(13).standard_normal((h, 2 * s - 1)).astype(np.float32)
    bias = torch.tensor(table, requires_grad=True)
    o = flashjit.attention(*leaves, causal=True, score_mod="score + bias[h][q_idx - kv_idx + 31]",
                           captures={"bias": bias})
    dout = torch.randn(o.shape, generator=torch.Generator().manual_seed(14)).to(torch.float16)
    o.backward(dout)
    assert bias.grad is not None and bias.grad.dtype == torch.float32

    exact = [t.detach().double().requires_grad_() for t in leaves]
    bias_ref = torch.tensor(table, dtype=torch.float64, requires_grad=True)
    scores = torch.einsum("bqhd,bkhd->bhqk", exact[0], exact[1]) / np.sqrt(d)
    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    scores = scores + bias_ref[:, i - j + s - 1][None]
    scores = scores.masked_fill(j > i, float("-inf"))
    o_ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, dim=-1), exact[2])
    o_ref.backward(dout.double())
    assert reference.relative_error(bias.grad, bias_ref.grad) < 2 * BAR[torch.float16]
    for name, leaf, ref in zip("qkv", leaves, exact):
        assert reference.relative_error(leaf.grad, ref.grad) < 2 * BAR[torch.float16], name
