"""attention_varlen, attention_with_kvcache, merge_states, layer_norm and rms_norm against
float64 references written here, on the CPU emulator."""

import math

import numpy as np
import pytest
import torch

import flashjit
from flashjit.flash_attn_interface import flash_attn_with_kvcache
import reference


def rand(*shape, dtype=torch.bfloat16, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def exact(t, grad=False):
    return t.detach().double().requires_grad_(grad)


def test_varlen_forward_and_gradients():
    lengths_q, lengths_k = [5, 0, 40, 17], [9, 3, 40, 30]
    cu_q = torch.tensor(np.cumsum([0] + lengths_q), dtype=torch.int32)
    cu_k = torch.tensor(np.cumsum([0] + lengths_k), dtype=torch.int32)
    q = rand(sum(lengths_q), 4, 64, seed=1).requires_grad_()
    k = rand(sum(lengths_k), 2, 64, seed=2).requires_grad_()
    v = rand(sum(lengths_k), 2, 64, seed=3).requires_grad_()
    o, lse = flashjit.attention_varlen(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k),
                                       causal=True, return_lse=True)
    assert lse.shape == (4, sum(lengths_q))
    dout = rand(*o.shape, seed=4)
    o.backward(dout)
    qx, kx, vx = exact(q, True), exact(k, True), exact(v, True)
    pieces = []
    for i in range(len(lengths_q)):
        rows = slice(int(cu_q[i]), int(cu_q[i + 1]))
        keys = slice(int(cu_k[i]), int(cu_k[i + 1]))
        if lengths_q[i] == 0:
            continue
        o_i, _ = reference.attention(qx[rows][None], kx[keys][None], vx[keys][None], causal=True)
        pieces.append(o_i[0])
    o_ref = torch.cat(pieces)
    o_ref.backward(dout.double())
    assert reference.relative_error(o.detach(), o_ref) < 3e-2
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad)):
        assert reference.relative_error(got, ref) < 6e-2


def test_varlen_seqused_reads_the_used_rows_and_zeroes_the_rest():
    used_q, used_k = [5, 0, 23], [9, 4, 30]
    spans_q, spans_k = [8, 3, 23], [12, 4, 35]  # padding rows past the used ones, NaN
    cu_q = torch.tensor(np.cumsum([0] + spans_q), dtype=torch.int32)
    cu_k = torch.tensor(np.cumsum([0] + spans_k), dtype=torch.int32)
    q = torch.full((sum(spans_q), 4, 64), float("nan"), dtype=torch.bfloat16)
    k = torch.full((sum(spans_k), 2, 64), float("nan"), dtype=torch.bfloat16)
    v = torch.full((sum(spans_k), 2, 64), float("nan"), dtype=torch.bfloat16)
    for i in range(3):
        q[int(cu_q[i]):int(cu_q[i]) + used_q[i]] = rand(used_q[i], 4, 64, seed=10 + i)
        k[int(cu_k[i]):int(cu_k[i]) + used_k[i]] = rand(used_k[i], 2, 64, seed=20 + i)
        v[int(cu_k[i]):int(cu_k[i]) + used_k[i]] = rand(used_k[i], 2, 64, seed=30 + i)
    q, k, v = q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    o, lse = flashjit.attention_varlen(
        q, k, v, cu_q, cu_k, max(spans_q), max(spans_k), causal=True, return_lse=True,
        seqused_q=torch.tensor(used_q, dtype=torch.int32),
        seqused_k=torch.tensor(used_k, dtype=torch.int32))
    dout = rand(*o.shape, seed=4)
    o.backward(dout)
    for i in range(3):
        rows = slice(int(cu_q[i]), int(cu_q[i]) + used_q[i])
        keys = slice(int(cu_k[i]), int(cu_k[i]) + used_k[i])
        pad_q = slice(int(cu_q[i]) + used_q[i], int(cu_q[i + 1]))
        pad_k = slice(int(cu_k[i]) + used_k[i], int(cu_k[i + 1]))
        assert torch.all(o[pad_q] == 0) and torch.all(lse[:, pad_q] == -math.inf)
        assert torch.all(q.grad[pad_q] == 0)
        assert torch.all(k.grad[pad_k] == 0) and torch.all(v.grad[pad_k] == 0)
        if used_q[i] == 0:
            continue
        qx, kx, vx = exact(q[rows], True), exact(k[keys], True), exact(v[keys], True)
        o_ref, _ = reference.attention(qx[None], kx[None], vx[None], causal=True)
        o_ref.backward(dout[rows].double()[None])
        assert reference.relative_error(o[rows].detach(), o_ref[0]) < 3e-2
        for got, ref in ((q.grad[rows], qx.grad), (k.grad[keys], kx.grad),
                         (v.grad[keys], vx.grad)):
            assert reference.relative_error(got, ref) < 6e-2


def paged_cache(keys, values, page, pool, seed):
    """The sequences' keys and values in a pool of `pool` pages of `page` rows, each sequence's
    pages scattered: (k_cache, v_cache, block_table int32 [batch, max_pages])."""
    pages = max(-(-len(k) // page) for k in keys)
    order = torch.randperm(pool, generator=torch.Generator().manual_seed(seed))
    block_table = order[:len(keys) * pages].reshape(len(keys), pages).to(torch.int32)
    k_cache = torch.zeros(pool, page, *keys[0].shape[1:], dtype=keys[0].dtype)
    v_cache = torch.zeros(pool, page, *values[0].shape[1:], dtype=values[0].dtype)
    for i, (k, v) in enumerate(zip(keys, values)):
        for j in range(-(-len(k) // page)):
            rows = slice(j * page, min((j + 1) * page, len(k)))
            k_cache[block_table[i, j], :rows.stop - rows.start] = k[rows]
            v_cache[block_table[i, j], :rows.stop - rows.start] = v[rows]
    return k_cache, v_cache, block_table


@pytest.mark.parametrize("page, causal, by_offsets", [(16, True, True), (1, False, False),
                                                      (5, True, False)])
def test_varlen_over_a_paged_cache(page, causal, by_offsets):
    # Mixed prefill and decoding: packed queries (a prompt, a decode step, a chunk) against
    # each sequence's keys in a paged cache, their counts as cu_seqlens_k or seqused_k.
    lengths_q, lengths_k = [9, 1, 6], [9, 40, 23]
    heads_q, heads_kv, d = 4, 2, 64
    cu_q = torch.tensor(np.cumsum([0] + lengths_q), dtype=torch.int32)
    q = rand(sum(lengths_q), heads_q, d, seed=90)
    keys = [rand(n, heads_kv, d, seed=91 + i) for i, n in enumerate(lengths_k)]
    values = [rand(n, heads_kv, d, seed=95 + i) for i, n in enumerate(lengths_k)]
    pool = 3 * -(-max(lengths_k) // page) + 4  # every sequence its pages, and spares
    k_cache, v_cache, block_table = paged_cache(keys, values, page, pool, seed=99)
    counts = torch.tensor(lengths_k, dtype=torch.int32)
    cu_k = torch.tensor(np.cumsum([0] + lengths_k), dtype=torch.int32)
    o, lse = flashjit.attention_varlen(
        q, k_cache, v_cache, cu_q, cu_k if by_offsets else None, max(lengths_q), max(lengths_k),
        causal=causal, block_table=block_table, seqused_k=None if by_offsets else counts,
        return_lse=True)
    assert o.shape == q.shape and lse.shape == (heads_q, sum(lengths_q))
    for i in range(3):
        rows = slice(int(cu_q[i]), int(cu_q[i + 1]))
        o_ref, lse_ref = reference.attention(exact(q[rows][None]), exact(keys[i][None]),
                                             exact(values[i][None]), causal=causal)
        assert reference.relative_error(o[rows], o_ref[0]) < 3e-2
        assert reference.relative_error(lse[:, rows], lse_ref[0]) < 1e-4
    with pytest.raises(ValueError, match="'block_table': attention over a paged cache has no"):
        flashjit.attention_varlen(q.requires_grad_(), k_cache, v_cache, cu_q, cu_k, 9, 40,
                                  block_table=block_table)
    with pytest.raises(ValueError, match="'cu_seqlens_k'"):
        flashjit.attention_varlen(q.detach(), k_cache, v_cache, cu_q, None, 9, 40,
                                  block_table=block_table)


@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_decoding(paged):
    batch, heads_q, heads_kv, d, page = 3, 8, 2, 64, 16
    used = [1, 37, 64]
    q = rand(batch, 1, heads_q, d, seed=5)
    keys = [rand(64, heads_kv, d, seed=10 + i) for i in range(batch)]
    values = [rand(64, heads_kv, d, seed=20 + i) for i in range(batch)]
    if paged:  # each sequence's 4 pages scattered over a pool of 16
        k_cache, v_cache, block_table = paged_cache(keys, values, page, 16, seed=6)
    else:
        block_table = None
        k_cache, v_cache = torch.stack(keys), torch.stack(values)
    seqlens = torch.tensor(used, dtype=torch.int32)
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, block_table=block_table)
    for i in range(batch):
        o_ref, _ = reference.attention(exact(q[i:i + 1]), exact(keys[i][:used[i]][None]),
                                       exact(values[i][:used[i]][None]))
        assert reference.relative_error(o[i:i + 1], o_ref) < 3e-2


def test_kvcache_mla_absorbed_decoding():
    # One latent head of 576 (512 latent + 64 rotary columns) for 16 query heads; the values
    # are the keys' first 512 columns (v_cache a view of the cache, as MLA stores it).
    batch, heads_q, d, dv, page = 2, 16, 576, 512, 16
    used = [5, 40]
    q = rand(batch, 1, heads_q, d, seed=7)
    kv_cache = rand(6, page, 1, d, seed=8)
    block_table = torch.tensor([[4, 1, 0], [2, 5, 3]], dtype=torch.int32)
    o = flashjit.attention_with_kvcache(q, kv_cache, kv_cache[..., :dv],
                                        torch.tensor(used, dtype=torch.int32),
                                        block_table=block_table)
    assert o.shape == (batch, 1, heads_q, dv)
    for i in range(batch):
        keys = kv_cache[block_table[i].long()].reshape(-1, 1, d)[:used[i]]
        o_ref, _ = reference.attention(exact(q[i:i + 1]), exact(keys[None]),
                                       exact(keys[None, ..., :dv]))
        assert reference.relative_error(o[i:i + 1], o_ref) < 3e-2


def test_kvcache_rejects_a_bad_page_index():
    q = rand(1, 1, 2, 64)
    cache = rand(2, 16, 2, 64)
    with pytest.raises(ValueError, match="invalid argument 'block_table'"):
        flashjit.attention_with_kvcache(q, cache, cache, 20,
                                        block_table=torch.tensor([[0, 5]], dtype=torch.int32))


def rope(positions, rotary_dim):
    pair = torch.arange(rotary_dim // 2, dtype=torch.float64)
    angle = torch.arange(positions, dtype=torch.float64)[:, None] * 10000.0 ** (-2 * pair / rotary_dim)
    return torch.cos(angle).float(), torch.sin(angle).float()


@pytest.mark.parametrize("page_size,interleaved", [(0, True), (1, False), (5, True)])
def test_kvcache_append_with_rotary_writes_the_cache(page_size, interleaved):
    batch, heads_q, heads_kv, d, capacity, new = 2, 4, 2, 64, 40, 2
    cached = [3, 30]
    q = rand(batch, new, heads_q, d, seed=30)
    k_new, v_new = rand(batch, new, heads_kv, d, seed=31), rand(batch, new, heads_kv, d, seed=32)
    keys = [rand(capacity, heads_kv, d, seed=33 + i) for i in range(batch)]
    values = [rand(capacity, heads_kv, d, seed=35 + i) for i in range(batch)]
    cos, sin = rope(capacity, 48)  # a partial rotary dim: the last 16 dims pass unchanged
    if page_size:  # pages in reverse order over a pool with one spare page
        per = capacity // page_size
        block_table = torch.arange(batch * per, dtype=torch.int32).flip(0).reshape(batch, per)
        k_cache = torch.zeros(batch * per + 1, page_size, heads_kv, d, dtype=torch.bfloat16)
        v_cache = torch.zeros_like(k_cache)
        for i in range(batch):
            k_cache[block_table[i].long()] = keys[i].reshape(per, page_size, heads_kv, d)
            v_cache[block_table[i].long()] = values[i].reshape(per, page_size, heads_kv, d)
    else:
        block_table = None
        k_cache, v_cache = torch.stack(keys), torch.stack(values)
    before_k, before_v = k_cache.clone(), v_cache.clone()
    seqlens = torch.tensor(cached, dtype=torch.int32)
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, k=k_new, v=v_new,
                                        rotary_cos=cos, rotary_sin=sin,
                                        rotary_interleaved=interleaved, block_table=block_table,
                                        causal=True)
    assert seqlens.tolist() == cached  # the caller advances the lengths

    def rows(cache, i):  # sequence i's keys in position order
        if block_table is None:
            return cache[i]
        return cache[block_table[i].long()].reshape(capacity, heads_kv, d)

    positions = [[c + j for j in range(new)] for c in cached]
    q_rot = reference.rotary(q, cos, sin, positions, interleaved).bfloat16()
    k_rot = reference.rotary(k_new, cos, sin, positions, interleaved).bfloat16()
    for i in range(batch):
        written = slice(cached[i], cached[i] + new)
        assert reference.relative_error(rows(k_cache, i)[written], k_rot[i].double()) < 4e-3
        assert torch.equal(rows(v_cache, i)[written], v_new[i])
        assert torch.equal(rows(k_cache, i)[:cached[i]], rows(before_k, i)[:cached[i]])
        assert torch.equal(rows(v_cache, i)[cached[i] + new:],
                           rows(before_v, i)[cached[i] + new:])
        keys_i = torch.cat([keys[i][:cached[i]].double(), k_rot[i].double()])
        values_i = torch.cat([values[i][:cached[i]].double(), v_new[i].double()])
        o_ref, _ = reference.attention(exact(q_rot[i:i + 1]), keys_i[None], values_i[None],
                                       causal=True)
        assert reference.relative_error(o[i:i + 1], o_ref) < 3e-2
    if page_size:
        spare = batch * capacity // page_size
        assert torch.equal(k_cache[spare], before_k[spare])


def test_kvcache_rows_and_left_pads():
    batch, heads_q, heads_kv, d, capacity = 2, 4, 2, 32, 24
    q = rand(batch, 1, heads_q, d, seed=50)
    k_cache, v_cache = rand(3, capacity, heads_kv, d, seed=51), rand(3, capacity, heads_kv, d, seed=52)
    k_new, v_new = rand(batch, 1, heads_kv, d, seed=53), rand(batch, 1, heads_kv, d, seed=54)
    rows = torch.tensor([2, 0], dtype=torch.int32)  # row 1 belongs to no sequence
    pads = torch.tensor([4, 0], dtype=torch.int32)
    seqlens = torch.tensor([10, 17], dtype=torch.int32)  # counted from the row's start
    before_k = k_cache.clone()
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, k=k_new, v=v_new,
                                        cache_batch_idx=rows, cache_leftpad=pads)
    assert torch.equal(k_cache[1], before_k[1])
    for i in range(batch):
        row, pad, end = int(rows[i]), int(pads[i]), int(seqlens[i])
        assert torch.equal(k_cache[row, end], k_new[i, 0])
        assert torch.equal(v_cache[row, end], v_new[i, 0])
        o_ref, _ = reference.attention(exact(q[i:i + 1]), exact(k_cache[row, pad:end + 1][None]),
                                       exact(v_cache[row, pad:end + 1][None]))
        assert reference.relative_error(o[i:i + 1], o_ref) < 3e-2
    with pytest.raises(ValueError, match="cache_leftpad"):
        flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, cache_batch_idx=rows,
                                        cache_leftpad=torch.tensor([11, 0], dtype=torch.int32))


def test_kvcache_with_a_score_modifier():
    q = rand(2, 1, 4, 64, seed=60)
    k_cache, v_cache = rand(2, 20, 2, 64, seed=61), rand(2, 20, 2, 64, seed=62)
    seqlens = torch.tensor([7, 20], dtype=torch.int32)
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens,
                                        score_mod="score - 0.25f * (b + 1) * kv_idx / 20")
    for i in range(2):
        keys = exact(k_cache[i:i + 1, :int(seqlens[i])])
        bias = -0.25 * (i + 1) * torch.arange(int(seqlens[i]), dtype=torch.float64) / 20
        # The bias as an extra key dimension: q·k/sqrt(d) + bias = [q, 1]·[k, bias·sqrt(d)]/sqrt(d)
        q_ext = torch.cat([exact(q[i:i + 1]), torch.ones(1, 1, 4, 1, dtype=torch.float64)], -1)
        k_ext = torch.cat([keys, (bias * 8.0)[None, :, None, None].expand(1, -1, 2, 1)], -1)
        o_ref, _ = reference.attention(q_ext, k_ext, exact(v_cache[i:i + 1, :int(seqlens[i])]),
                                       scale=1 / 8.0)
        assert reference.relative_error(o[i:i + 1], o_ref) < 3e-2
    # The same modifier as a FlexAttention-style callable.
    traced = flashjit.attention_with_kvcache(
        q, k_cache, v_cache, seqlens,
        score_mod=lambda score, b, h, q_idx, kv_idx: score - 0.25 * (b + 1) * kv_idx / 20)
    assert reference.relative_error(traced, o.float()) < 1e-3


def test_numpy_kvcache_append_without_rotary():
    rng = np.random.default_rng(40)
    q = rng.standard_normal((1, 1, 2, 32)).astype(np.float16)
    k_cache = rng.standard_normal((1, 8, 1, 32)).astype(np.float16)
    v_cache = rng.standard_normal((1, 8, 1, 32)).astype(np.float16)
    k_new = rng.standard_normal((1, 1, 1, 32)).astype(np.float16)
    v_new = rng.standard_normal((1, 1, 1, 32)).astype(np.float16)
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, 5, k=k_new, v=v_new)
    assert np.array_equal(k_cache[0, 5], k_new[0, 0]) and np.array_equal(v_cache[0, 5], v_new[0, 0])
    o_ref, _ = reference.attention(q, k_cache[:, :6], v_cache[:, :6])
    assert reference.relative_error(o, o_ref) < 3e-3


def test_kvcache_append_into_a_narrower_value_cache():
    # MLA's shape in small: keys 64 wide, values 32, GQA 2:1, causal, two cached lengths.
    rng = np.random.default_rng(41)
    q = rng.standard_normal((2, 2, 4, 64)).astype(np.float16)
    k_cache = rng.standard_normal((2, 40, 2, 64)).astype(np.float16)
    v_cache = rng.standard_normal((2, 40, 2, 32)).astype(np.float16)
    k_new = rng.standard_normal((2, 2, 2, 64)).astype(np.float16)
    v_new = rng.standard_normal((2, 2, 2, 32)).astype(np.float16)
    cached = np.array([10, 20], dtype=np.int32)
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, cached, k=k_new, v=v_new,
                                        causal=True)
    assert o.shape == (2, 2, 4, 32)
    for b, n in enumerate(cached):
        assert np.array_equal(k_cache[b, n:n + 2], k_new[b])
        assert np.array_equal(v_cache[b, n:n + 2], v_new[b])
        o_ref, _ = reference.attention(q[b:b + 1], k_cache[b:b + 1, :n + 2],
                                       v_cache[b:b + 1, :n + 2], causal=True)
        assert reference.relative_error(o[b:b + 1], o_ref) < 3e-3


def test_kvcache_append_bad_input_is_named_and_writes_nothing():
    q = rand(1, 1, 2, 64)
    k_cache, v_cache = rand(1, 16, 2, 64, seed=1), rand(1, 16, 2, 64, seed=2)
    before = k_cache.clone()
    cos, sin = rope(16, 64)
    with pytest.raises(ValueError, match="rotary_cos"):
        flashjit.attention_with_kvcache(q, k_cache, v_cache, 3, rotary_cos=cos, rotary_sin=sin)
    # 16 cached + 1 new: past the cache
    with pytest.raises(ValueError, match="invalid argument 'cache_seqlens'"):
        flashjit.attention_with_kvcache(q, k_cache, v_cache, 16, k=rand(1, 1, 2, 64),
                                        v=rand(1, 1, 2, 64))
    with pytest.raises(ValueError, match="v_new"):
        flashjit.attention_with_kvcache(q, k_cache, v_cache, 3, k=rand(1, 1, 2, 64))
    assert torch.equal(k_cache, before)


def test_merge_states_of_two_key_halves_is_attention_over_all():
    q, k, v = rand(1, 30, 4, 64, seed=7), rand(1, 60, 4, 64, seed=8), rand(1, 60, 4, 64, seed=9)
    o_a, lse_a = flashjit.attention(q, k[:, :25], v[:, :25], return_lse=True)
    o_b, lse_b = flashjit.attention(q, k[:, 25:], v[:, 25:], return_lse=True)
    states = torch.stack([o_a[0].float(), o_b[0].float()], dim=1)  # [tokens, 2, heads, d]
    lses = torch.stack([lse_a[0].T, lse_b[0].T], dim=1)  # [tokens, 2, heads]
    o, lse = flashjit.merge_states(states, lses)
    o_ref, lse_ref = reference.attention(exact(q), exact(k), exact(v))
    assert o.shape == (30, 4, 64) and lse.shape == (30, 4)
    assert reference.relative_error(o, o_ref[0]) < 2e-2
    assert reference.relative_error(lse, lse_ref[0].T) < 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_and_rms_norm_with_gradients(dtype):
    x = rand(3, 5, 300, dtype=dtype, seed=11).requires_grad_()
    weight = rand(300, dtype=dtype, seed=12).requires_grad_()
    bias = rand(300, dtype=dtype, seed=13).requires_grad_()
    dy = rand(3, 5, 300, dtype=dtype, seed=14)
    bar = 1e-5 if dtype == torch.float32 else 2e-2
    y = flashjit.layer_norm(x, weight, bias)
    y.backward(dy)
    xs, ws, bs = exact(x, True), exact(weight, True), exact(bias, True)
    y_ref = torch.nn.functional.layer_norm(xs, (300,), ws, bs, eps=1e-5)
    y_ref.backward(dy.double())
    assert reference.relative_error(y.detach(), y_ref) < bar
    for got, ref in ((x.grad, xs.grad), (weight.grad, ws.grad), (bias.grad, bs.grad)):
        assert reference.relative_error(got, ref) < 2 * bar

    x.grad = weight.grad = None
    y = flashjit.rms_norm(x, weight)
    y.backward(dy)
    xs, ws = exact(x, True), exact(weight, True)
    y_ref = xs / torch.sqrt((xs * xs).mean(-1, keepdim=True) + 1e-6) * ws
    y_ref.backward(dy.double())
    assert reference.relative_error(y.detach(), y_ref) < bar
    for got, ref in ((x.grad, xs.grad), (weight.grad, ws.grad)):
        assert reference.relative_error(got, ref) < 2 * bar


def test_numpy_layer_norm():
    rng = np.random.default_rng(15)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    w, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    y = flashjit.layer_norm(x, w, b)
    xd = x.astype(np.float64)
    y_ref = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w + b
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    assert np.max(np.abs(y - y_ref)) < 1e-4
    with pytest.raises(ValueError, match="'eps'"):
        flashjit.layer_norm(x, w, b, eps=0.0)
    # No bias: torch's F.layer_norm(bias=None), a bias of zeros.
    assert np.array_equal(flashjit.layer_norm(x, w), flashjit.layer_norm(x, w, np.zeros_like(b)))


def test_bad_inference_arguments_are_named():
    q, k = rand(10, 2, 64), rand(12, 2, 64)
    falling = torch.tensor([0, 6, 4], dtype=torch.int32)  # not nondecreasing
    ok = torch.tensor([0, 6, 12], dtype=torch.int32)
    # The library's check, in the caller's name (not its field's, 'sequences.cu_seqlens_q').
    with pytest.raises(ValueError, match="argument 'cu_seqlens_q': decreases at position 2"):
        flashjit.attention_varlen(q, k, k, falling, ok, 6, 6)
    with pytest.raises(ValueError, match=r"'cu_seqlens_q' must be \[batch \+ 1\]"):
        flashjit.attention_varlen(q, k, k, ok[None], ok, 6, 6)
    with pytest.raises(ValueError, match=r"'v' must be \[tokens, num_states, heads, head_dim\]"):
        flashjit.merge_states(rand(4, 2, 64), torch.zeros(4, 2, 1))
    with pytest.raises(ValueError, match=r"'s' must be \[tokens, num_states, heads\]"):
        flashjit.merge_states(rand(4, 2, 1, 64), torch.zeros(4, 2))


def e4m3_values() -> np.ndarray:
    """The value of each e4m3 code 0..255 by the format's definition (bias 7, subnormals at
    exponent 0); the NaN codes 0x7F and 0xFF are never produced by quantize()."""
    codes = np.arange(256)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 7
    magnitude = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6,
                         (1 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))
    return np.where(codes & 0x80, -magnitude, magnitude)


def quantize(x: np.ndarray, descale: np.ndarray):
    """x / descale rounded to the nearest finite e4m3 code, and the codes' values times descale
    (what the attention sees)."""
    table = e4m3_values()
    finite = np.array([c for c in range(256) if c & 0x7F != 0x7F])
    scaled = x / descale
    codes = finite[np.abs(scaled[..., None] - table[finite]).argmin(axis=-1)].astype(np.uint8)
    return codes, table[codes] * descale


@pytest.mark.parametrize("use_torch", [True, False])
def test_kvcache_fp8_cache_with_descale_factors(use_torch):
    batch, heads_q, heads_kv, d, capacity = 2, 4, 2, 64, 40
    used = [40, 13]
    rng = np.random.default_rng(7)
    q = rng.standard_normal((batch, 1, heads_q, d)).astype(np.float16)
    k_scale = np.array([2.0 ** -5, 2.0 ** -6], dtype=np.float32)  # per key/value head
    v_scale = np.array([2.0 ** -6, 2.0 ** -7], dtype=np.float32)
    k_codes, k_true = quantize(rng.standard_normal((batch, capacity, heads_kv, d)),
                               k_scale[None, None, :, None])
    v_codes, v_true = quantize(rng.standard_normal((batch, capacity, heads_kv, d)),
                               v_scale[None, None, :, None])
    seqlens = np.array(used, dtype=np.int32)
    args = (q, k_codes, v_codes, seqlens)
    if use_torch:
        args = tuple(torch.from_numpy(a) for a in args)
        o = flashjit.attention_with_kvcache(*args, k_descale=torch.from_numpy(k_scale),
                                            v_descale=torch.from_numpy(v_scale))
    else:
        o = flashjit.attention_with_kvcache(*args, k_descale=k_scale, v_descale=v_scale)
    o = torch.as_tensor(np.asarray(o, dtype=np.float32)) if not use_torch else o
    for i in range(batch):
        o_ref, _ = reference.attention(torch.tensor(q[i:i + 1], dtype=torch.float64),
                                       torch.tensor(k_true[i:i + 1, :used[i]]),
                                       torch.tensor(v_true[i:i + 1, :used[i]]))
        assert reference.relative_error(o[i:i + 1], o_ref) < 3e-3
    if use_torch and hasattr(torch, "float8_e4m3fn"):  # PyTorch 2.1 and later
        # The same codes as torch's fp8 dtype: the same call, the same bits.
        as_fp8 = lambda codes: torch.from_numpy(codes).view(torch.float8_e4m3fn)
        o_fp8 = flashjit.attention_with_kvcache(
            args[0], as_fp8(k_codes), as_fp8(v_codes), args[3],
            k_descale=torch.from_numpy(k_scale), v_descale=torch.from_numpy(v_scale))
        assert torch.equal(o_fp8, o)
    # Each error names this call's argument (k_descale, k), not the library's Sequences field.
    with pytest.raises(ValueError, match="invalid argument 'k_descale.shape'"):
        flashjit.attention_with_kvcache(q, k_codes, v_codes, seqlens,
                                        k_descale=np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="invalid argument 'k[.']"):
        flashjit.attention_with_kvcache(q, k_codes, v_codes, seqlens,
                                        k=np.zeros((batch, 1, heads_kv, d), dtype=np.float16),
                                        v=np.zeros((batch, 1, heads_kv, d), dtype=np.float16))


def test_kvcache_append_into_an_fp8_cache():
    # FlashAttention 3's rule: the new keys and values arrive as e4m3 codes in the cache's scale
    # and are copied into it; the attention reads them with the same descale factors.
    batch, heads_q, heads_kv, d, capacity, new = 2, 4, 2, 32, 24, 1
    rng = np.random.default_rng(11)
    q = rng.standard_normal((batch, 1, heads_q, d)).astype(np.float16)
    k_scale = np.array([2.0 ** -5, 2.0 ** -6], dtype=np.float32)
    v_scale = np.array([2.0 ** -6, 2.0 ** -7], dtype=np.float32)
    k_codes, k_true = quantize(rng.standard_normal((batch, capacity, heads_kv, d)),
                               k_scale[None, None, :, None])
    v_codes, v_true = quantize(rng.standard_normal((batch, capacity, heads_kv, d)),
                               v_scale[None, None, :, None])
    cached = np.array([5, 20], dtype=np.int32)
    k_new, v_new = k_codes[:, :new].copy(), v_codes[:, :new].copy()  # any codes will do
    k_cache, v_cache = k_codes.copy(), v_codes.copy()
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, cached, k=k_new, v=v_new,
                                        k_descale=k_scale, v_descale=v_scale)
    o = torch.as_tensor(np.asarray(o, dtype=np.float32))
    for i in range(batch):
        end = int(cached[i])
        assert np.array_equal(k_cache[i, end:end + new], k_new[i])
        assert np.array_equal(v_cache[i, end:end + new], v_new[i])
        assert np.array_equal(k_cache[i, end + new:], k_codes[i, end + new:])
        keys = np.concatenate([k_true[i, :end], k_true[i, :new]])
        values = np.concatenate([v_true[i, :end], v_true[i, :new]])
        o_ref, _ = reference.attention(torch.tensor(q[i:i + 1], dtype=torch.float64),
                                       torch.tensor(keys[None]), torch.tensor(values[None]))
        assert reference.relative_error(o[i:i + 1], o_ref) < 3e-3


def test_kvcache_paged_rows_and_left_pads():
    # FlashAttention 3's rule: cache_batch_idx picks a row of the page table, the left pad is a
    # position in the sequence's pages.
    heads_q, heads_kv, d, page = 4, 2, 32, 4
    q = rand(2, 1, heads_q, d, seed=70)
    pool = 12
    k_cache = rand(pool, page, heads_kv, d, seed=71)
    v_cache = rand(pool, page, heads_kv, d, seed=72)
    block_table = torch.tensor([[3, 7, 1], [9, 0, 5], [2, 11, 4]], dtype=torch.int32)
    rows = torch.tensor([2, 0], dtype=torch.int32)  # table row 1 belongs to no sequence
    pads = torch.tensor([3, 0], dtype=torch.int32)
    seqlens = torch.tensor([9, 6], dtype=torch.int32)  # counted from the row's start
    k_new, v_new = rand(2, 1, heads_kv, d, seed=73), rand(2, 1, heads_kv, d, seed=74)
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, k=k_new, v=v_new,
                                        cache_batch_idx=rows, cache_leftpad=pads,
                                        block_table=block_table)
    for i in range(2):
        positions = k_cache[block_table[int(rows[i])].long()].reshape(-1, heads_kv, d)
        values = v_cache[block_table[int(rows[i])].long()].reshape(-1, heads_kv, d)
        pad, end = int(pads[i]), int(seqlens[i])
        assert torch.equal(positions[end], k_new[i, 0])
        o_ref, _ = reference.attention(exact(q[i:i + 1]), exact(positions[pad:end + 1][None]),
                                       exact(values[pad:end + 1][None]))
        assert reference.relative_error(o[i:i + 1], o_ref) < 3e-2
    with pytest.raises(ValueError, match="invalid argument 'cache_batch_idx'"):
        flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, k=k_new, v=v_new,
                                        cache_batch_idx=torch.tensor([1, 1], dtype=torch.int32),
                                        block_table=block_table)


def test_kvcache_append_with_packed_queries():
    # FlashAttention 3's flash_attn_with_kvcache with cu_seqlens_q: each sequence its own number
    # of queries, rotated at the cached count + i (causal), appending two keys to a dense cache.
    heads_q, heads_kv, d, capacity, new = 4, 2, 32, 24, 2
    lengths_q, cached = [1, 4, 3], [3, 15, 0]
    cu_q = torch.tensor(np.cumsum([0] + lengths_q), dtype=torch.int32)
    q = rand(sum(lengths_q), heads_q, d, seed=80)
    k_cache = rand(3, capacity, heads_kv, d, seed=81)
    v_cache = rand(3, capacity, heads_kv, d, seed=82)
    k_new, v_new = rand(3, new, heads_kv, d, seed=83), rand(3, new, heads_kv, d, seed=84)
    cos, sin = rope(capacity, d)
    seqlens = torch.tensor(cached, dtype=torch.int32)
    o, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, rotary_cos=cos,
                                     rotary_sin=sin, cache_seqlens=seqlens, causal=True,
                                     rotary_interleaved=False, cu_seqlens_q=cu_q,
                                     max_seqlen_q=max(lengths_q), return_softmax_lse=True)
    assert o.shape == q.shape and lse.shape == (heads_q, sum(lengths_q))
    for i in range(3):
        rows = slice(int(cu_q[i]), int(cu_q[i + 1]))
        positions = [[cached[i] + j for j in range(lengths_q[i])]]
        q_rot = reference.rotary(q[rows][None], cos, sin, positions, False).bfloat16()
        k_rot = reference.rotary(k_new[i:i + 1], cos, sin,
                                 [[cached[i] + j for j in range(new)]], False).bfloat16()
        keys = torch.cat([k_cache[i, :cached[i]].double(), k_rot[0].double()])
        values = torch.cat([v_cache[i, :cached[i]].double(), v_new[i].double()])
        o_ref, lse_ref = reference.attention(exact(q_rot), keys[None], values[None], causal=True)
        assert reference.relative_error(o[rows], o_ref[0]) < 3e-2
        assert reference.relative_error(lse[:, rows], lse_ref[0]) < 1e-3
    with pytest.raises(ValueError, match="'max_seqlen_q'"):
        flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, cu_seqlens_q=cu_q)
