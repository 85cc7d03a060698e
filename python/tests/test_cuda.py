"""The package on a GPU (CUDA tensors, the current stream): each call against the float64
references at a size where the kernels' tiles are full and ragged, gradients included, and
torch.compile's trace through the custom operator on CUDA tensors. These run where PyTorch sees
a GPU (tools/gpu_run.sh's python step); elsewhere they are skipped, and the emulator's tests
cover the same calls on host memory."""

import pytest
import torch

import flashjit
import reference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")


def rand(*shape, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype).cuda()


def exact(t, grad=False):
    return t.detach().double().cpu().requires_grad_(grad)


@pytest.mark.parametrize("head_dim", [64, 128, 192, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_and_gradients_on_the_gpu(head_dim, causal):
    q = rand(2, 300, 8, head_dim, seed=1).requires_grad_()
    k = rand(2, 333, 2, head_dim, seed=2).requires_grad_()
    v = rand(2, 333, 2, head_dim, seed=3).requires_grad_()
    o, lse = flashjit.attention(q, k, v, causal=causal, return_lse=True)
    assert o.is_cuda and lse.is_cuda and lse.dtype == torch.float32
    dout = rand(*o.shape, seed=4)
    o.backward(dout)
    qx, kx, vx = exact(q, True), exact(k, True), exact(v, True)
    o_ref, lse_ref = reference.attention(qx, kx, vx, causal=causal)
    o_ref.backward(dout.double().cpu())
    assert reference.relative_error(o.detach().cpu(), o_ref) < 2e-2
    assert reference.relative_error(lse.cpu(), lse_ref) < 1e-4
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad)):
        assert reference.relative_error(got.cpu(), ref) < 4e-2


def test_the_call_runs_on_the_current_stream():
    q, k, v = (rand(1, 512, 4, 128, seed=s) for s in (5, 6, 7))
    expected = flashjit.attention(q, k, v)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        o = flashjit.attention(q, k, v)
    stream.synchronize()
    assert torch.equal(o, expected)


def test_paged_decoding_varlen_and_norms_on_the_gpu():
    batch, heads_q, heads_kv, d, page = 3, 8, 2, 128, 16
    q = rand(batch, 1, heads_q, d, seed=8)
    k_cache, v_cache = rand(12, page, heads_kv, d, seed=9), rand(12, page, heads_kv, d, seed=10)
    table = torch.randperm(12, generator=torch.Generator().manual_seed(11))
    table = table.reshape(batch, 4).to(torch.int32).cuda()
    used = torch.tensor([1, 40, 64], dtype=torch.int32).cuda()
    o = flashjit.attention_with_kvcache(q, k_cache, v_cache, used, block_table=table)
    for i in range(batch):
        keys = k_cache[table[i].long()].reshape(1, -1, heads_kv, d)[:, :int(used[i])]
        values = v_cache[table[i].long()].reshape(1, -1, heads_kv, d)[:, :int(used[i])]
        o_ref, _ = reference.attention(exact(q[i:i + 1]), exact(keys), exact(values))
        assert reference.relative_error(o[i:i + 1].cpu(), o_ref) < 2e-2

    cu = torch.tensor([0, 70, 70, 200], dtype=torch.int32).cuda()
    qv, kv = rand(200, 4, 64, seed=12), rand(200, 2, 64, seed=13)
    ov = flashjit.attention_varlen(qv, kv, kv, cu, cu, 130, 130, causal=True)
    for lo, hi in ((0, 70), (70, 200)):
        o_ref, _ = reference.attention(exact(qv[lo:hi])[None], exact(kv[lo:hi])[None],
                                       exact(kv[lo:hi])[None], causal=True)
        assert reference.relative_error(ov[lo:hi].cpu(), o_ref[0]) < 2e-2

    x, w, b = rand(64, 4096, seed=14), rand(4096, seed=15), rand(4096, seed=16)
    y = flashjit.layer_norm(x, w, b)
    y_ref = torch.nn.functional.layer_norm(exact(x), (4096,), exact(w), exact(b), eps=1e-5)
    assert reference.relative_error(y.cpu(), y_ref) < 2e-2


def test_a_decoding_step_replays_from_a_cuda_graph():
    # An inference engine's decoding loop: one call first (its kernels compiled and loaded, the
    # runtime's split workspace made), then the step captured into a CUDA graph (torch's side
    # stream: the call launches on the current stream) and replayed after new queries and cache
    # lengths are written into the captured tensors: no host work of the call is replayed, so a
    # call that read them on the host, allocated or synchronized would fail here.
    batch, heads_q, heads_kv, d, page = 4, 8, 2, 128, 16
    q = rand(batch, 1, heads_q, d, seed=30)
    k_cache, v_cache = rand(16, page, heads_kv, d, seed=31), rand(16, page, heads_kv, d, seed=32)
    table = torch.arange(16, dtype=torch.int32).reshape(batch, 4).cuda()
    lengths = torch.tensor([5, 17, 40, 64], dtype=torch.int32).cuda()

    def step():
        return flashjit.attention_with_kvcache(q, k_cache, v_cache, lengths, block_table=table)
    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = step()
    q.copy_(rand(batch, 1, heads_q, d, seed=33))
    lengths.copy_(torch.tensor([64, 1, 33, 20], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    assert reference.relative_error(o.cpu(), step().double().cpu()) < 1e-3
    for i in range(batch):  # and against float64, at the new lengths
        keys = k_cache[table[i].long()].reshape(1, -1, heads_kv, d)[:, :int(lengths[i])]
        values = v_cache[table[i].long()].reshape(1, -1, heads_kv, d)[:, :int(lengths[i])]
        o_ref, _ = reference.attention(exact(q[i:i + 1]), exact(keys), exact(values))
        assert reference.relative_error(o[i:i + 1].cpu(), o_ref) < 2e-2


@pytest.mark.skipif(not hasattr(torch.library, "custom_op"), reason="PyTorch before 2.4")
def test_torch_compile_on_the_gpu():
    def loss(q, k, v):
        return flashjit.attention(q, k, v, causal=True, deterministic=True).float().square().sum()

    compiled = torch.compile(loss, fullgraph=True)
    eager_inputs = [rand(2, 256, 4, 128, seed=s).requires_grad_() for s in (17, 18, 19)]
    traced_inputs = [t.detach().clone().requires_grad_() for t in eager_inputs]
    loss(*eager_inputs).backward()
    compiled(*traced_inputs).backward()
    for eager, traced in zip(eager_inputs, traced_inputs):  # the loss's own kernels may differ
        assert reference.relative_error(traced.grad.cpu(), exact(eager.grad)) < 1e-3


def test_callable_modifiers_warm_and_automatic_block_masks_on_the_gpu():
    # A document mask (int64 ids on the GPU) and a relative bias with a learnable table, as
    # FlexAttention callables, through the modifier custom operators; the same call after
    # warm(); a block-diagonal mask that reads no capture, whose automatic block mask must keep
    # the output's bits.
    s, h, d = 512, 4, 128
    q, k, v = (rand(1, s, h, d, seed=seed).requires_grad_() for seed in (20, 21, 22))
    documents = (torch.arange(s) // 100).cuda()
    table = (0.1 * torch.randn(h, 2 * s - 1)).cuda().requires_grad_()

    def bias(score, b, hd, q_idx, kv_idx):
        return score + table[hd, q_idx - kv_idx + s - 1]

    def same_document(b, hd, q_idx, kv_idx):
        return (documents[q_idx] == documents[kv_idx]) & (q_idx >= kv_idx)

    flashjit.warm(q, k, v, score_mod=bias, mask_mod=same_document)
    o = flashjit.attention(q, k, v, score_mod=bias, mask_mod=same_document)
    dout = rand(*o.shape, seed=23)
    o.backward(dout)
    assert table.grad is not None and table.grad.is_cuda

    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    qx, kx, vx = exact(q, True), exact(k, True), exact(v, True)
    table_x = exact(table, True)
    scores = torch.einsum("bqhd,bkhd->bhqk", qx, kx) / d ** 0.5 + table_x[:, i - j + s - 1][None]
    seen = (documents.cpu()[:, None] == documents.cpu()[None, :]) & (j <= i)
    scores = scores.masked_fill(~seen, float("-inf"))
    o_ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, dim=-1), vx)
    o_ref.backward(dout.double().cpu())
    assert reference.relative_error(o.detach().cpu(), o_ref) < 2e-2
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad),
                     (table.grad, table_x.grad)):
        assert reference.relative_error(got.cpu(), ref) < 4e-2

    blocks = "(q_idx / 128) == (kv_idx / 128)"
    plain = flashjit.attention(q.detach(), k.detach(), v.detach(),
                               mask_mod=blocks, block_mask=None)
    built = flashjit.build_block_mask(blocks, 1, h, s, s, like=q)
    given = flashjit.attention(q.detach(), k.detach(), v.detach(), mask_mod=blocks,
                               block_mask=built)
    assert torch.equal(plain, given)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_learnable_sinks_on_the_gpu(head_dim):
    # The sinks' pass after the Hopper (or mma.sync) forward and their gradient's two kernels
    # after its backward, against float64; decoding split across CTAs counts the sink once.
    q = rand(2, 300, 8, head_dim, seed=30).requires_grad_()
    k, v = (rand(2, 333, 2, head_dim, seed=s).requires_grad_() for s in (31, 32))
    sinks = (torch.randn(8, generator=torch.Generator().manual_seed(33)) * 2).cuda()
    sinks.requires_grad_()
    o, lse = flashjit.attention(q, k, v, causal=True, sinks=sinks, return_lse=True)
    dout = rand(*o.shape, seed=34)
    o.backward(dout)
    qx, kx, vx, sx = exact(q, True), exact(k, True), exact(v, True), exact(sinks, True)
    o_ref, lse_ref = reference.attention(qx, kx, vx, causal=True, sinks=sx)
    o_ref.backward(dout.double().cpu())
    assert reference.relative_error(o.detach().cpu(), o_ref) < 2e-2
    assert reference.relative_error(lse.cpu(), lse_ref) < 1e-4
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad),
                     (sinks.grad, sx.grad)):
        assert reference.relative_error(got.cpu(), ref) < 4e-2
    decode_q = rand(2, 1, 8, head_dim, seed=35)
    expected = reference.attention(exact(decode_q), exact(k), exact(v), sinks=exact(sinks))[0]
    for splits in (1, 4):
        got = flashjit.attention_with_kvcache(decode_q, k.detach(), v.detach(), 333,
                                              num_splits=splits, sinks=sinks.detach())
        assert reference.relative_error(got.cpu(), expected) < 2e-2


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("deterministic", [False, True])
def test_dropout_on_the_gpu(head_dim, deterministic):
    # Dropout's Philox mask on the mma.sync kernels (which sm_90a's config choice keeps it on),
    # forward and backward in both dQ modes, against float64 with the documented mask; a
    # variable-length call's sequences by their index; the same seed, the same bits.
    q = rand(2, 300, 8, head_dim, seed=40).requires_grad_()
    k, v = (rand(2, 333, 2, head_dim, seed=s).requires_grad_() for s in (41, 42))
    dropout = (0.2, 1234, 7)
    o, lse = flashjit.attention(q, k, v, causal=True, return_lse=True, dropout_p=dropout[0],
                                dropout_seed=dropout[1], dropout_offset=dropout[2],
                                deterministic=deterministic)
    dout = rand(*o.shape, seed=43)
    o.backward(dout)
    qx, kx, vx = exact(q, True), exact(k, True), exact(v, True)
    o_ref, lse_ref = reference.attention(qx, kx, vx, causal=True, dropout=dropout)
    o_ref.backward(dout.double().cpu())
    assert reference.relative_error(o.detach().cpu(), o_ref) < 2e-2
    assert reference.relative_error(lse.cpu(), lse_ref) < 1e-4
    for got, ref in ((q.grad, qx.grad), (k.grad, kx.grad), (v.grad, vx.grad)):
        assert reference.relative_error(got.cpu(), ref) < 4e-2
    again = flashjit.attention(q.detach(), k.detach(), v.detach(), causal=True,
                               dropout_p=dropout[0], dropout_seed=dropout[1],
                               dropout_offset=dropout[2])
    assert torch.equal(again, o.detach())
    cu_q = torch.tensor([0, 100, 300], dtype=torch.int32).cuda()
    cu_k = torch.tensor([0, 150, 333], dtype=torch.int32).cuda()
    packed = flashjit.attention_varlen(q.detach()[0], k.detach()[0], v.detach()[0], cu_q, cu_k,
                                       200, 183, dropout_p=0.3, dropout_seed=5)
    for b, (qs, ks) in enumerate(((slice(0, 100), slice(0, 150)),
                                  (slice(100, 300), slice(150, 333)))):
        expected = reference.attention(exact(q[0, qs][None]), exact(k[0, ks][None]),
                                       exact(v[0, ks][None]), dropout=(0.3, 5, 0),
                                       first_batch=b)[0]
        assert reference.relative_error(packed[qs].cpu(), expected[0]) < 2e-2
