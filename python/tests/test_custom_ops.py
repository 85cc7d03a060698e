"""attention() as PyTorch custom operators where PyTorch has torch.library.custom_op (2.4 and
later): the operators pass torch.library.opcheck (schema, fake implementation, autograd
registration) and torch.compile traces attention() in one graph with the same results as eager.
Debian's PyTorch 1.13 has no custom_op: there the fallback is checked instead."""

import pytest
import torch

import flashjit
from flashjit import _custom_ops

HAS_CUSTOM_OP = hasattr(torch.library, "custom_op")
needs_custom_op = pytest.mark.skipif(not HAS_CUSTOM_OP,
                                     reason="PyTorch before 2.4 has no torch.library.custom_op")


def inputs(requires_grad=False):
    g = torch.Generator().manual_seed(31)
    q = torch.randn(1, 20, 4, 32, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(1, 30, 2, 32, generator=g).to(torch.bfloat16) for _ in range(2))
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def test_registered_exactly_where_pytorch_has_custom_op():
    assert (_custom_ops.forward_op is not None) == HAS_CUSTOM_OP
    assert (_custom_ops.unavailable == "") == HAS_CUSTOM_OP
    o = flashjit.attention(*inputs(), causal=True)  # either way, the call works
    assert o.shape == (1, 20, 4, 32) and o.dtype == torch.bfloat16


@needs_custom_op
def test_operators_pass_opcheck():
    q, k, v = inputs(requires_grad=True)
    # deterministic: the same bits on every run, which opcheck's comparisons rely on
    torch.library.opcheck(torch.ops.flashjit.attention_forward.default,
                          (q, k, v, True, -1, -1, 0.0, None, True))
    o, lse = torch.ops.flashjit.attention_forward(q.detach(), k.detach(), v.detach(), True, -1,
                                                  -1, 0.0, None, True)
    torch.library.opcheck(torch.ops.flashjit.attention_backward.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse, True,
                           -1, -1, 0.0, None, True))


@needs_custom_op
def test_torch_compile_traces_attention_in_one_graph():
    def loss(q, k, v):
        return flashjit.attention(q, k, v, causal=True, deterministic=True).float().square().sum()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    eager_inputs, compiled_inputs = inputs(True), inputs(True)
    loss(*eager_inputs).backward()
    compiled(*compiled_inputs).backward()
    for eager, traced in zip(eager_inputs, compiled_inputs):
        assert torch.equal(eager.grad, traced.grad)
