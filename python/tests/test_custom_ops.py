"""The calls as PyTorch custom operators where PyTorch has torch.library.custom_op (2.4 and
later): every operator passes torch.library.opcheck (schema and its mutations, fake
implementation, autograd registration, tracing with static and dynamic shapes), and
torch.compile(fullgraph=True) traces each call, forward and backward, with the same results as
eager. Debian 12's PyTorch 1.13 has no custom_op: there only the fallback is checked (the other
test files cover the calls themselves on both)."""

import functools

import pytest
import torch

import flashjit
from flashjit import _custom_ops

HAS_CUSTOM_OP = hasattr(torch.library, "custom_op")
needs_custom_op = pytest.mark.skipif(not HAS_CUSTOM_OP,
                                     reason="PyTorch before 2.4 has no torch.library.custom_op")

OPERATORS = {"attention_forward", "attention_backward", "attention_forward_modified",
             "attention_backward_modified", "attention_varlen_forward",
             "attention_varlen_backward", "attention_with_kvcache",
             "attention_with_kvcache_append", "merge_states", "layer_norm_forward",
             "layer_norm_backward", "multiscale_attention_forward",
             "multiscale_attention_backward", "attention_forward_fp8"}


def randn(seed, *shape, dtype=torch.bfloat16, grad=False):
    """The same tensor for the same seed (compiled and eager runs get equal inputs)."""
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    return t.requires_grad_(grad)


def dense(grad=False):
    return randn(1, 1, 20, 4, 32, grad=grad), *(randn(s, 1, 30, 2, 32, grad=grad) for s in (2, 3))


def packed(grad=False):
    q, k, v = randn(4, 20, 4, 32, grad=grad), *(randn(s, 30, 2, 32, grad=grad) for s in (5, 6))
    int32 = lambda *values: torch.tensor(values, dtype=torch.int32)
    return q, k, v, int32(0, 7, 20), int32(0, 12, 30)


def kvcache():
    q, k_cache, v_cache = (randn(s, *shape, dtype=torch.float16) for s, shape in
                           ((7, (2, 1, 4, 64)), (8, (2, 40, 2, 64)), (9, (2, 40, 2, 64))))
    return q, k_cache, v_cache, torch.tensor([20, 31], dtype=torch.int32)


def new_keys():
    return tuple(randn(s, 2, 1, 2, 64, dtype=torch.float16) for s in (10, 11))


def test_registered_exactly_where_pytorch_has_custom_op():
    assert set(_custom_ops.operators) == (OPERATORS if HAS_CUSTOM_OP else set())
    assert (_custom_ops.unavailable == "") == HAS_CUSTOM_OP
    o = flashjit.attention(*dense(), causal=True)  # either way, the call works
    assert o.shape == (1, 20, 4, 32) and o.dtype == torch.bfloat16


def flags(causal=True, deterministic=True):
    # deterministic: the same bits on every run, which opcheck's comparisons rely on
    return (causal, -1, -1, 0.0, None, deterministic)


ALIBI = torch.tensor([0.5, 0.25, 0.125, 0.0625])  # slopes of 4 query heads


@needs_custom_op
def test_attention_operators_pass_opcheck():
    q, k, v = dense(grad=True)
    ops = torch.ops.flashjit
    for alibi in (None, ALIBI):
        torch.library.opcheck(ops.attention_forward.default, (q, k, v, *flags(), alibi))
        o, lse = ops.attention_forward(q.detach(), k.detach(), v.detach(), *flags(), alibi)
        torch.library.opcheck(ops.attention_backward.default,
                              (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse,
                               *flags(), alibi))


NO_DROPOUT = (0.0, 0, 0)  # the modifier operators' dropout_p, dropout_seed, dropout_offset


@needs_custom_op
def test_modifier_operators_pass_opcheck():
    q, k, v = dense(grad=True)
    bias = torch.randn(4, 59, requires_grad=True)
    modifiers = ("score + bias[h][q_idx - kv_idx + 29]", "kv_idx <= q_idx + 10", "bias", [bias])
    ops = torch.ops.flashjit
    torch.library.opcheck(ops.attention_forward_modified.default,
                          (q, k, v, *flags(False), *modifiers, None, None, *NO_DROPOUT))
    o, lse = ops.attention_forward_modified(q.detach(), k.detach(), v.detach(), *flags(False),
                                            *modifiers[:3], [bias.detach()], None, None,
                                            *NO_DROPOUT)
    torch.library.opcheck(ops.attention_backward_modified.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse,
                           *flags(False), *modifiers[:3], [bias.detach()], None, None,
                           *NO_DROPOUT, [True], [torch.zeros(4, 59)], None))
    # With learnable sinks and their gradient, without modifiers.
    sinks = torch.randn(4, requires_grad=True)
    torch.library.opcheck(ops.attention_forward_modified.default,
                          (q, k, v, *flags(), "", "", "", [], None, sinks, *NO_DROPOUT))
    o, lse = ops.attention_forward_modified(q.detach(), k.detach(), v.detach(), *flags(), "", "",
                                            "", [], None, sinks.detach(), *NO_DROPOUT)
    torch.library.opcheck(ops.attention_backward_modified.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse,
                           *flags(), "", "", "", [], None, sinks.detach(), *NO_DROPOUT, [], [],
                           torch.zeros(4)))
    # With dropout (p, seed, offset), alone: the backward regenerates the forward's mask.
    dropout = (0.25, 1234, 5)
    torch.library.opcheck(ops.attention_forward_modified.default,
                          (q, k, v, *flags(), "", "", "", [], None, None, *dropout))
    o, lse = ops.attention_forward_modified(q.detach(), k.detach(), v.detach(), *flags(), "", "",
                                            "", [], None, None, *dropout)
    torch.library.opcheck(ops.attention_backward_modified.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse,
                           *flags(), "", "", "", [], None, None, *dropout, [], [], None))


@needs_custom_op
def test_varlen_operators_pass_opcheck():
    q, k, v, cu_q, cu_k = packed(grad=True)
    used_k = torch.tensor([10, 18], dtype=torch.int32)
    args = (cu_q, cu_k, 13, 18, None, used_k, ALIBI, *flags(), "", "", "", [], None)
    ops = torch.ops.flashjit
    torch.library.opcheck(ops.attention_varlen_forward.default,
                          (q, k, v, *args, None, *NO_DROPOUT))
    o, lse = ops.attention_varlen_forward(q.detach(), k.detach(), v.detach(), *args, None,
                                          *NO_DROPOUT)
    torch.library.opcheck(ops.attention_varlen_backward.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse, *args,
                           *NO_DROPOUT, [], [], None))
    # With dropout (p, seed, offset): the backward regenerates the forward's mask.
    dropout = (0.2, 9, 1)
    torch.library.opcheck(ops.attention_varlen_forward.default,
                          (q, k, v, *args, None, *dropout))
    o, lse = ops.attention_varlen_forward(q.detach(), k.detach(), v.detach(), *args, None,
                                          *dropout)
    torch.library.opcheck(ops.attention_varlen_backward.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse, *args,
                           *dropout, [], [], None))
    # With learnable sinks and their gradient.
    sinks = torch.randn(4, requires_grad=True)
    sunk = (*args[:-1], sinks)
    torch.library.opcheck(ops.attention_varlen_forward.default,
                          (q, k, v, *sunk, None, *NO_DROPOUT))
    o, lse = ops.attention_varlen_forward(q.detach(), k.detach(), v.detach(), *args[:-1],
                                          sinks.detach(), None, *NO_DROPOUT)
    torch.library.opcheck(ops.attention_varlen_backward.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse,
                           *args[:-1], sinks.detach(), *NO_DROPOUT, [], [], torch.zeros(4)))
    # With modifiers: a learnable bias per relative position, a mask of the sequence's rows.
    bias = torch.randn(4, 59, requires_grad=True)
    modified = (cu_q, cu_k, 13, 18, None, used_k, None, *flags(False),
                "score + bias[h][q_idx - kv_idx + 29]", "kv_idx <= q_idx + b", "bias", [bias])
    torch.library.opcheck(ops.attention_varlen_forward.default,
                          (q, k, v, *modified, None, None, *NO_DROPOUT))
    detached = (*modified[:-1], [bias.detach()], None)
    o, lse = ops.attention_varlen_forward(q.detach(), k.detach(), v.detach(), *detached, None,
                                          *NO_DROPOUT)
    torch.library.opcheck(ops.attention_varlen_backward.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse,
                           *detached, *NO_DROPOUT, [True], [torch.zeros(4, 59)], None))
    # Over a paged cache (forward only): k and v as 5 pages of 8 rows, sequence 1 on pages 3, 0.
    k_cache, v_cache = (randn(s, 5, 8, 2, 32) for s in (21, 22))
    block_table = torch.tensor([[1, 4], [3, 0]], dtype=torch.int32)
    torch.library.opcheck(ops.attention_varlen_forward.default,
                          (q.detach(), k_cache, v_cache, cu_q, None, 13, 16, None,
                           torch.tensor([9, 16], dtype=torch.int32), ALIBI, *flags(), "", "",
                           "", [], None, block_table, *NO_DROPOUT))


@needs_custom_op
def test_kvcache_operators_pass_opcheck():
    q, k_cache, v_cache, seqlens = kvcache()
    nones = (None,) * 9  # k, v, rotary tables, cache rows and pads, block table, descales
    rest = (True, 0, False, -1, -1, 0.0, None, ALIBI, "", "", "", [], None)
    torch.library.opcheck(torch.ops.flashjit.attention_with_kvcache.default,
                          (q, k_cache, v_cache, seqlens, *nones, *rest))
    # The append writes the same keys at the same positions on every run opcheck makes.
    k_new, v_new = new_keys()
    torch.library.opcheck(torch.ops.flashjit.attention_with_kvcache_append.default,
                          (q, k_cache, v_cache, seqlens, k_new, v_new, *nones[2:], *rest))
    torch.ops.flashjit.attention_with_kvcache_append(q, k_cache, v_cache, seqlens, k_new, v_new,
                                                     *nones[2:], *rest)
    assert torch.equal(k_cache[0, 20], k_new[0, 0]) and torch.equal(v_cache[1, 31], v_new[1, 0])
    # With modifiers reading a capture: a bias per sequence.
    modified = (*rest[:-6], None, "score - bias[b] * kv_idx", "kv_idx % 3 != 1", "bias",
                [torch.tensor([0.01, 0.02])], torch.tensor([0.5, -0.5, 1.0, 0.0]))
    torch.library.opcheck(torch.ops.flashjit.attention_with_kvcache.default,
                          (q, k_cache, v_cache, seqlens, *nones, *modified))


@needs_custom_op
def test_norm_merge_and_multiscale_operators_pass_opcheck():
    ops = torch.ops.flashjit
    x, weight, bias = randn(12, 3, 5, 64, grad=True), *(randn(s, 64, grad=True) for s in (13, 14))
    for rms in (False, True):
        b = None if rms else bias
        torch.library.opcheck(ops.layer_norm_forward.default, (x, weight, b, 1e-5, rms))
        y, mean, rstd = ops.layer_norm_forward(x.detach(), weight.detach(),
                                               None if rms else bias.detach(), 1e-5, rms)
        torch.library.opcheck(ops.layer_norm_backward.default,
                              (torch.randn_like(y), x.detach(), weight.detach(),
                               None if rms else mean, rstd, 1e-5, rms))
    torch.library.opcheck(ops.merge_states.default,
                          (randn(15, 6, 3, 2, 32, dtype=torch.float32),
                           randn(16, 6, 3, 2, dtype=torch.float32)))
    q, k, v = multiscale_inputs()[:3]
    mask = randn(20, 2, 16, 16, dtype=torch.float32, grad=True)
    torch.library.opcheck(ops.multiscale_attention_forward.default, (q, k, v, None, mask, None))
    o, rowsum = ops.multiscale_attention_forward(q.detach(), k.detach(), v.detach(), None,
                                                 mask.detach(), 0.3)
    torch.library.opcheck(ops.multiscale_attention_backward.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), None,
                           mask.detach(), o, rowsum, 0.3, True))


def multiscale_inputs():
    return (*(randn(s, 1, 16, 2, 32, dtype=torch.float16, grad=True) for s in (17, 18, 19)),
            randn(20, 2, 16, 16, dtype=torch.float32, grad=True))


def compiled_matches_eager(loss, make_inputs):
    """loss over make_inputs() eagerly and compiled in one graph: the same value and the same
    gradients of every input that requires grad."""
    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    eager_inputs, compiled_inputs = make_inputs(), make_inputs()
    eager_loss, compiled_loss = loss(*eager_inputs), compiled(*compiled_inputs)
    assert torch.equal(eager_loss, compiled_loss)
    eager_loss.backward()
    compiled_loss.backward()
    differentiated = [(e, c) for e, c in zip(eager_inputs, compiled_inputs)
                      if isinstance(e, torch.Tensor) and e.requires_grad]
    assert differentiated
    for eager, traced in differentiated:
        assert traced.grad is not None and torch.equal(eager.grad, traced.grad)


def square_sum(t):
    return t.float().square().sum()


@needs_custom_op
def test_torch_compile_traces_attention_in_one_graph():
    compiled_matches_eager(
        lambda q, k, v: square_sum(flashjit.attention(q, k, v, causal=True, deterministic=True)),
        lambda: dense(grad=True))


@needs_custom_op
def test_torch_compile_traces_alibi_in_one_graph():
    compiled_matches_eager(
        lambda q, k, v: square_sum(flashjit.attention(q, k, v, causal=True, deterministic=True,
                                                      alibi_slopes=ALIBI)),
        lambda: dense(grad=True))


@needs_custom_op
def test_torch_compile_traces_dropout_with_a_given_seed_in_one_graph():
    # A given seed and offset: one graph, forward and backward (a drawn seed reads torch's
    # generator with .item(), which dynamo does not trace under fullgraph).
    compiled_matches_eager(
        lambda q, k, v: square_sum(flashjit.attention(q, k, v, causal=True, deterministic=True,
                                                      dropout_p=0.25, dropout_seed=77,
                                                      dropout_offset=3)),
        lambda: dense(grad=True))


RELATIVE = torch.linspace(-1.0, 1.0, 59)  # a bias per relative position, read by a callable


def relative_softcap(score, b, h, q_idx, kv_idx):
    return 20.0 * torch.tanh(score / 20.0) + RELATIVE[q_idx - kv_idx + 29]


def striped_window(b, h, q_idx, kv_idx):
    return (q_idx + 10 >= kv_idx) & ((q_idx // 8) % 2 == 0)


@needs_custom_op
def test_torch_compile_traces_callable_modifiers_in_one_graph():
    # FlexAttention-style callables traced ahead (trace_modifiers) into text and captures: the
    # compiled function holds the custom operator and the captures, fullgraph=True; a captured
    # tensor and Python numbers included.
    like = dense()[0]
    mods = flashjit.trace_modifiers(relative_softcap, striped_window, like=like)
    assert mods["score_mod"] == "scalars[1] * tanh(score / scalars[0]) + tensor0[q_idx - " \
                                "kv_idx + int(scalars[2])]"
    compiled_matches_eager(
        lambda q, k, v: square_sum(flashjit.attention(q, k, v, deterministic=True, **mods)),
        lambda: dense(grad=True))


@needs_custom_op
def test_torch_compile_traces_callables_given_inside_the_graph():
    # The callables go straight to attention inside the compiled function: traced as a
    # constant of the graph, with the global tensor they index as its input; one graph.
    compiled_matches_eager(
        lambda q, k, v: square_sum(flashjit.attention(
            q, k, v, score_mod=relative_softcap, mask_mod=striped_window, deterministic=True)),
        lambda: dense(grad=True))


class Biases(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.per_head = torch.nn.Parameter(torch.linspace(-0.5, 0.5, 4))


def biased_documents(biases, cap, documents):
    """A factory's closures, as FlexAttention's examples make them: a module's parameter, a
    number and an int64 tensor in their cells."""
    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap) + biases.per_head[h]

    def mask_mod(b, h, q_idx, kv_idx):
        return documents[b, q_idx] == documents[b, kv_idx]
    return score_mod, mask_mod


@needs_custom_op
def test_closures_in_the_graph_keep_their_parameters_gradient():
    documents = (torch.arange(30) // 7).to(torch.int64)[None]  # keys are 30
    grads = []
    for compile_it in (False, True):
        biases = Biases()
        score_mod, mask_mod = biased_documents(biases, 15.0, documents)

        def loss(q, k, v):
            return square_sum(flashjit.attention(q, k, v, score_mod=score_mod,
                                                 mask_mod=mask_mod, deterministic=True))
        run = torch.compile(loss, backend="aot_eager", fullgraph=True) if compile_it else loss
        inputs = dense(grad=True)
        run(*inputs).backward()
        grads.append([biases.per_head.grad, *[t.grad for t in inputs]])
    for eager, compiled in zip(*grads):
        assert compiled is not None and torch.equal(eager, compiled)


CAP = 20.0  # a global number a callable reads: changing it must not reuse the old table


def global_softcap(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


@needs_custom_op
def test_a_callables_changed_number_is_not_stale_in_the_graph():
    # A new value of the number compiles the graph again (a guard); the same value does not.
    global CAP
    graphs = []

    def counting(graph, example_inputs):
        graphs.append(graph)
        return graph.forward
    compiled = torch.compile(lambda q, k, v: flashjit.attention(q, k, v,
                                                                score_mod=global_softcap),
                             backend=counting, fullgraph=True)
    q, k, v = dense()
    try:
        results = []
        for CAP in (20.0, 0.5, 0.5):
            eager = flashjit.attention(q, k, v, score_mod=global_softcap)
            results.append(compiled(q, k, v))
            assert torch.equal(eager, results[-1])
        assert not torch.equal(results[0], results[1]) and len(graphs) == 2
    finally:
        CAP = 20.0


def scaled(score, b, h, q_idx, kv_idx, factor):
    return score * factor


halved = functools.partial(scaled, factor=0.5)  # a partial: no cells of its own to read


@needs_custom_op
def test_callables_defined_inside_a_compiled_function_are_traced_eagerly():
    # A function dynamo makes itself (with cells of its own, or none), and a functools.partial,
    # are not function objects whose cells can be read: their traces run eagerly (a graph
    # break), with eager's results.
    def loss(q, k, v):
        offset = 29

        def window(b, h, q_idx, kv_idx):
            return q_idx - kv_idx <= 6

        def shifted(score, b, h, q_idx, kv_idx):
            return score + RELATIVE[q_idx - kv_idx + offset]
        return square_sum(flashjit.attention(q, k, v, score_mod=shifted, mask_mod=window,
                                             deterministic=True) +
                          flashjit.attention(q, k, v, score_mod=halved, deterministic=True))

    compiled = torch.compile(loss, backend="aot_eager")
    eager_inputs, compiled_inputs = dense(grad=True), dense(grad=True)
    eager_loss, compiled_loss = loss(*eager_inputs), compiled(*compiled_inputs)
    assert torch.equal(eager_loss, compiled_loss)
    eager_loss.backward()
    compiled_loss.backward()
    for eager, traced in zip(eager_inputs, compiled_inputs):
        assert torch.equal(eager.grad, traced.grad)


@needs_custom_op
def test_torch_compile_traces_sinks_in_one_graph():
    # Learnable sinks, dense and packed, with their gradient: one graph each.
    def sinks():
        return torch.linspace(-1.0, 1.0, 4).requires_grad_()
    compiled_matches_eager(
        lambda q, k, v, s: square_sum(flashjit.attention(q, k, v, causal=True,
                                                         deterministic=True, sinks=s)),
        lambda: (*dense(grad=True), sinks()))
    compiled_matches_eager(
        lambda q, k, v, cu_q, cu_k, s: square_sum(flashjit.attention_varlen(
            q, k, v, cu_q, cu_k, 13, 18, causal=True, deterministic=True, sinks=s)),
        lambda: (*packed(grad=True), sinks()))


@needs_custom_op
def test_torch_compile_traces_varlen_in_one_graph():
    compiled_matches_eager(
        lambda q, k, v, cu_q, cu_k: square_sum(flashjit.attention_varlen(
            q, k, v, cu_q, cu_k, 13, 18, causal=True, deterministic=True,
            alibi_slopes=ALIBI.expand(2, 4))),
        lambda: packed(grad=True))


@needs_custom_op
def test_torch_compile_traces_varlen_with_traced_modifiers_in_one_graph():
    like = packed()[0]
    mods = flashjit.trace_modifiers(relative_softcap, striped_window, like=like)
    compiled_matches_eager(
        lambda q, k, v, cu_q, cu_k: square_sum(flashjit.attention_varlen(
            q, k, v, cu_q, cu_k, 13, 18, deterministic=True, **mods)),
        lambda: packed(grad=True))


@needs_custom_op
def test_torch_compile_traces_norms_and_multiscale_in_one_graph():
    def norms(x, weight, bias):
        return square_sum(flashjit.layer_norm(x, weight, bias)) + square_sum(
            flashjit.rms_norm(x, weight))

    compiled_matches_eager(norms, lambda: (randn(12, 3, 5, 64, grad=True),
                                           *(randn(s, 64, grad=True) for s in (13, 14))))
    compiled_matches_eager(
        lambda q, k, v, mask: square_sum(flashjit.multiscale_attention(q, k, v, mask=mask)),
        multiscale_inputs)


@needs_custom_op
def test_torch_compile_traces_decoding_with_an_append_and_a_merge():
    def decode(q, k_cache, v_cache, seqlens, k_new, v_new):
        o, lse = flashjit.attention_with_kvcache(q, k_cache, v_cache, seqlens, k=k_new, v=v_new,
                                                 return_lse=True, alibi_slopes=ALIBI)
        # Merge the state with itself: the same output, the LSE raised by log 2.
        states = torch.stack([o[:, 0], o[:, 0]], dim=1).float()
        lses = torch.stack([lse[:, :, 0], lse[:, :, 0]], dim=1)
        merged, merged_lse = flashjit.merge_states(states, lses)
        return o, lse, merged, merged_lse

    compiled = torch.compile(decode, backend="aot_eager", fullgraph=True)
    eager_inputs, compiled_inputs = (*kvcache(), *new_keys()), (*kvcache(), *new_keys())
    for eager, traced in zip(decode(*eager_inputs), compiled(*compiled_inputs)):
        assert torch.equal(eager, traced)
    # The compiled call wrote the new keys and values into its cache, as the eager one did.
    assert torch.equal(eager_inputs[1], compiled_inputs[1])
    assert torch.equal(compiled_inputs[1][1, 31], compiled_inputs[4][1, 0])
    o, lse, merged, merged_lse = decode(*eager_inputs)
    assert torch.allclose(merged, o[:, 0].float(), atol=1e-3)
    assert torch.allclose(merged_lse, lse[:, :, 0] + torch.log(torch.tensor(2.0)), atol=1e-5)
