"""torch's functions and Tensor methods a modifier callable may call on traced values, found
through torch's __torch_function__ protocol by name (torch.exp and Tensor.exp alike), each as
a handler building the Symbol of its result. install() makes them Symbol's
__torch_function__ (the tracer, _trace, calls it), so that the symbols know nothing of torch's
names."""

from ._symbols import Symbol, arguments_of, call, index_tensor, maximum, minimum, operand, where

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def torch_function(func):
    """The handler, (captures, *args, **kwargs) -> Symbol, of a torch function or Tensor method
    called with a Symbol among its arguments (torch's __torch_function__ protocol). Functions
    and methods are known by name: torch.exp and Tensor.exp mean the same."""
    name = getattr(func, "__name__", "")
    if torch is not None and func is getattr(torch.Tensor, "where", None):
        # x.where(condition, y): x where the condition holds
        return lambda c, x, condition, y: where(operand(condition, c), operand(x, c),
                                                operand(y, c))
    return _HANDLERS.get(name.strip("_") if name.startswith("__") else name)


def _lift(method):  # a Symbol method applied to the first operand
    return lambda c, x, *args, **kwargs: getattr(operand(x, c), method)(*args, **kwargs)


def _operator(fn):  # a binary operator over two operands
    return lambda c, a, b, **_: fn(operand(a, c), operand(b, c))


def _divide(c, a, b, rounding_mode=None):
    a, b = operand(a, c), operand(b, c)
    if rounding_mode is None:
        return a / b
    if rounding_mode == "floor":
        return a // b
    raise c.error(f"division with rounding_mode={rounding_mode!r}: use // (floor) instead")


def _getitem(c, t, index):
    return t[index] if isinstance(t, Symbol) else index_tensor(c, t, index)


def _logical(op):
    def apply(a, b):
        a, b = (x if x.kind == "bool" else x != 0 for x in (a, b))
        return op(a, b)
    return apply


def _logical_not(c, x):
    x = operand(x, c)
    return ~(x if x.kind == "bool" else x != 0)


_HANDLERS = {
    **{name: _lift(name) for name in (
        "exp", "exp2", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "sin", "cos", "abs",
        "sigmoid", "clamp", "clip", "clamp_min", "clamp_max", "float", "int", "long")},
    "neg": _lift("__neg__"), "negative": _lift("__neg__"), "invert": _lift("__invert__"),
    "logical_not": _logical_not,
    "where": lambda c, condition, a, b: where(operand(condition, c), operand(a, c),
                                              operand(b, c)),
    "div": _divide, "divide": _divide, "truediv": _operator(lambda a, b: a / b),
    "true_divide": _operator(lambda a, b: a / b), "rtruediv": _operator(lambda a, b: b / a),
    "getitem": _getitem,
    "add": _operator(lambda a, b: a + b), "radd": _operator(lambda a, b: b + a),
    "sub": _operator(lambda a, b: a - b), "subtract": _operator(lambda a, b: a - b),
    "rsub": _operator(lambda a, b: b - a),
    "mul": _operator(lambda a, b: a * b), "multiply": _operator(lambda a, b: a * b),
    "rmul": _operator(lambda a, b: b * a),
    "floordiv": _operator(lambda a, b: a // b), "floor_divide": _operator(lambda a, b: a // b),
    "rfloordiv": _operator(lambda a, b: b // a),
    "mod": _operator(lambda a, b: a % b), "remainder": _operator(lambda a, b: a % b),
    "rmod": _operator(lambda a, b: b % a),
    "pow": _operator(lambda a, b: call("pow", "float", a, b)),
    "rpow": _operator(lambda a, b: call("pow", "float", b, a)),
    "eq": _operator(lambda a, b: a == b), "ne": _operator(lambda a, b: a != b),
    "lt": _operator(lambda a, b: a < b), "le": _operator(lambda a, b: a <= b),
    "gt": _operator(lambda a, b: a > b), "ge": _operator(lambda a, b: a >= b),
    "minimum": _operator(lambda a, b: minimum(a, b)),
    "maximum": _operator(lambda a, b: maximum(a, b)),
    "and": _operator(lambda a, b: a & b), "rand": _operator(lambda a, b: b & a),
    "or": _operator(lambda a, b: a | b), "ror": _operator(lambda a, b: b | a),
    "xor": _operator(lambda a, b: a ^ b), "rxor": _operator(lambda a, b: b ^ a),
    "bitwise_and": _operator(lambda a, b: a & b), "bitwise_or": _operator(lambda a, b: a | b),
    "bitwise_xor": _operator(lambda a, b: a ^ b),
    "logical_and": _operator(_logical(lambda a, b: a & b)),
    "logical_or": _operator(_logical(lambda a, b: a | b)),
    "logical_xor": _operator(_logical(lambda a, b: a ^ b)),
}


def _dispatch(cls, func, types, args=(), kwargs=None):
    """Symbol.__torch_function__: torch's `func` called with a Symbol among its arguments."""
    kwargs = kwargs or {}
    captures = next(a.captures for a in arguments_of(args, kwargs) if isinstance(a, Symbol))
    handler = torch_function(func)
    if handler is None:
        name = getattr(func, "__name__", repr(func))
        raise captures.error(f"torch.{name} has no counterpart in the modifier language "
                             f"(see docs/modifiers.md for what it has)")
    return handler(captures, *args, **kwargs)


def install() -> None:
    """Makes _dispatch Symbol's __torch_function__."""
    Symbol.__torch_function__ = classmethod(_dispatch)
