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


def takes(*arrays) -> bool:
    """Whether a call with these arrays (None: absent) goes through its operator: operators are
    registered and every array is a torch tensor (a numpy array among them takes the call's
    other path, which names it in its error)."""
    return AVAILABLE and all(x is None or isinstance(x, torch.Tensor) for x in arrays)


def empty_like_none(like) -> "torch.Tensor":
    """The placeholder for an output an operator does not produce this time (schemas have no
    optional outputs): an empty float32 tensor on `like`'s device."""
    return like.new_empty((0,), dtype=torch.float32)
