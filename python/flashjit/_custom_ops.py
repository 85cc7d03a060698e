"""The calls as PyTorch custom operators, flashjit::<name> (torch.library.custom_op, PyTorch 2.4
and later), each with a fake implementation that gives its outputs' shapes and dtypes without
running anything, so that torch.compile traces the calls whole instead of breaking its graph at
them, and with its gradient formula registered where the call is differentiable. Where PyTorch
has no custom_op, the calls differentiate through autograd.Functions instead."""

from typing import Callable, Optional

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

#: Whether this PyTorch can register custom operators.
AVAILABLE = torch is not None and hasattr(torch.library, "custom_op")
#: Why the operators are not registered ("" when they are).
unavailable = "" if AVAILABLE else (
    "PyTorch is not installed" if torch is None else
    "this PyTorch has no torch.library.custom_op (2.4 and later have it)")
#: The registered operators by name (without the "flashjit::" namespace).
operators = {}


def define(name: str, fake: Callable, *, mutates_args=(), backward: Optional[Callable] = None,
           setup_context: Optional[Callable] = None) -> Callable:
    """A decorator that registers its function as the operator flashjit::<name> (its schema
    from the function's type annotations) with `fake` as its fake implementation and, when
    given, `backward` and `setup_context` as its gradient formula (register_autograd's); it
    returns the operator. `mutates_args` names the arguments the operator writes in place."""

    def register(function: Callable):
        op = torch.library.custom_op(f"flashjit::{name}", function, mutates_args=mutates_args)
        op.register_fake(fake)
        if backward is not None:
            op.register_autograd(backward, setup_context=setup_context)
        operators[name] = op
        return op

    return register


def _traced(arrays) -> bool:
    """Whether the call is being traced rather than run: under torch.compile or torch.export,
    or with tensors of a tracing mode (fake or functional tensors: any subclass but
    nn.Parameter)."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling():
        return True
    plain = (torch.Tensor, torch.nn.Parameter)
    return any(x is not None and type(x) not in plain for x in arrays)


def takes(*arrays) -> bool:
    """Whether a call with these arrays (None: absent) goes through its operator: operators are
    registered, every array is a torch tensor (a numpy array among them takes the call's other
    path, which names it in its error) and the call is being traced (_traced). An eager call
    runs the same code without the operator: its dispatch costs host time on every call (on
    the H200 machine of 2026-12-04, 290-460 us more for a layer norm's gradient than the eager
    path's 283 us: bench/call_overhead.py), which short GPU work waits for."""
    return (AVAILABLE and all(x is None or isinstance(x, torch.Tensor) for x in arrays)
            and _traced(arrays))


def empty_like_none(like) -> "torch.Tensor":
    """The placeholder for an output an operator does not produce this time (schemas have no
    optional outputs): an empty float32 tensor on `like`'s device."""
    return like.new_empty((0,), dtype=torch.float32)
