"""The symbolic values a modifier callable is traced with (python/flashjit/_trace.py): each
Symbol holds its text in the modifier language (docs/modifiers.md), its type and its C++
precedence, and builds its operators' text with Python's meaning (/ divides as floats, //
floors, % takes the divisor's sign). Captures records the tensors a trace indexes and the Python
numbers it meets (one captured float32 table), so that new values keep the text."""

import numbers
import re
from typing import List, Tuple

import numpy as np

from ._arrays import is_torch

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

# C++'s precedence levels, higher binds tighter: an operand whose level is below what its
# place needs is parenthesized.
PRIMARY, UNARY, PRODUCT, SUM, SHIFT, RELATION, EQUALITY = 16, 15, 14, 13, 12, 11, 10
BITAND, BITXOR, BITOR, AND, OR, TERNARY = 9, 8, 7, 6, 5, 4

#: The name of the captured table of a callable's Python numbers.
SCALARS = "scalars"
# Integers a float32 table holds exactly.
EXACT_INT = 1 << 24
INT32_MAX = (1 << 31) - 1
#: The captures one call takes (flashjit::Capture::kMaxPerCall).
MAX_CAPTURES = 4


class Captures:
    """What the callables of one call read: tensors (by identity of their memory) and Python
    numbers. `owner` names the modifier being traced, for errors."""

    def __init__(self):
        self.tensors: List[Tuple[str, object]] = []
        self.scalars: List[float] = []
        self.originals = []  # (tensor as the function gave it, name)
        self.names = {}  # a tensor's memory (pointer, shape, strides, dtype, device) -> name
        self.from_numpy = set()  # ids of the tensors that stand for a callable's numpy arrays
        self.owner = ""

    def error(self, message: str) -> ValueError:
        return ValueError(f"'{self.owner}': {message}")

    def scalar(self, value) -> "Symbol":
        """A Python number as a read of the table (ints that a float32 holds exactly through
        int()), or as literal text for an int too large for the table."""
        if isinstance(value, (bool, np.bool_)):
            return literal(bool(value), self)
        if isinstance(value, numbers.Integral):
            value = int(value)
            if abs(value) > EXACT_INT:
                if abs(value) > INT32_MAX:
                    raise self.error(f"the integer {value} does not fit an int32")
                return literal(value, self)
            self.scalars.append(float(value))
            return Symbol(f"int({SCALARS}[{len(self.scalars) - 1}])", "int", PRIMARY, self, value)
        self.scalars.append(float(value))
        return Symbol(f"{SCALARS}[{len(self.scalars) - 1}]", "float", PRIMARY, self, value)

    def tensor(self, t) -> str:
        """The capture name of tensor t (converted to a dtype captures take): one per tensor
        object, and eagerly one per memory (views made by each read are one capture)."""
        for known, name in self.originals:
            if known is t:
                return name
        compiling = torch_compiling()  # torch.compile traces this: no pointers, no values
        key = None if compiling else (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype,
                                      str(t.device))
        if key is not None and key in self.names:
            return self.names[key]
        original = t
        if t.dtype in (torch.float64,):
            t = t.float()
        elif not t.is_floating_point() and t.dtype != torch.int32:
            if t.dtype == torch.int64 and not compiling and t.device.type == "cpu" and \
                    t.numel() and (t.min() < -INT32_MAX - 1 or t.max() > INT32_MAX):
                raise self.error("an int64 tensor it indexes holds values beyond int32")
            t = t.to(torch.int32)
        if len(self.tensors) >= MAX_CAPTURES:
            raise self.error(f"reads more than {MAX_CAPTURES} tensors (the library takes "
                             f"{MAX_CAPTURES} captures)")
        name = f"tensor{len(self.tensors)}"
        self.tensors.append((name, t))
        self.originals.append((original, name))
        if key is not None:
            self.names[key] = name
        return name

    def check_count(self) -> None:
        """Raises unless the tensors and the numbers' table fit the library's captures (the
        table takes one where the callables use a number)."""
        if len(self.tensors) + bool(self.scalars) > MAX_CAPTURES:
            raise self.error(f"reads {len(self.tensors)} tensors and Python numbers: the "
                             f"library takes {MAX_CAPTURES} captures, the numbers' table one of "
                             f"them (write a number as a 1-element tensor's entry instead)")

    def table(self, like):
        """The numbers' table, float32 like `like` (numpy or torch, on its device), or None."""
        if not self.scalars:
            return None
        if is_torch(like):
            return torch.tensor(self.scalars, dtype=torch.float32, device=like.device)
        return np.array(self.scalars, dtype=np.float32)


def torch_compiling() -> bool:
    """Whether torch.compile is tracing the call (PyTorch 2.3 and later can say)."""
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and getattr(compiler, "is_compiling", lambda: False)())


def literal(value, captures: Captures) -> "Symbol":
    """A structural constant of the trace itself (0 and 1 in a formula), as text."""
    if isinstance(value, bool):
        return Symbol("true" if value else "false", "bool", PRIMARY, captures, value)
    if isinstance(value, int):
        return Symbol(str(value), "int", PRIMARY if value >= 0 else UNARY, captures, value)
    return Symbol(f"{value!r}f", "float", PRIMARY, captures, value)


def wrap(x: "Symbol", level: int) -> str:
    """x's text as an operand of an operator of `level`."""
    return x.text if x.level >= level else f"({x.text})"


def binary(op: str, a: "Symbol", b: "Symbol", level: int, kind: str,
           nonneg: bool = False) -> "Symbol":
    """a op b for a left-associative operator of `level`."""
    return Symbol(f"{wrap(a, level)} {op} {wrap(b, level + 1)}", kind, level, a.captures,
                  nonneg=nonneg)


def call(function: str, kind: str, *args: "Symbol", nonneg: bool = False) -> "Symbol":
    return Symbol(f"{function}({', '.join(a.text for a in args)})", kind, PRIMARY,
                  args[0].captures, nonneg=nonneg)


def unary(op: str, a: "Symbol", kind: str) -> "Symbol":
    operand = a.text if a.level >= UNARY and not a.text.startswith(("-", "+")) else f"({a.text})"
    return Symbol(f"{op}{operand}", kind, UNARY, a.captures)


def where(condition: "Symbol", a: "Symbol", b: "Symbol") -> "Symbol":
    kind = "float" if "float" in (a.kind, b.kind) else "int" if "int" in (a.kind, b.kind) else \
        "bool"
    return Symbol(f"{wrap(condition, OR)} ? {a.text} : {b.text}", kind, TERNARY,
                  condition.captures, nonneg=a.nonneg and b.nonneg)


def arithmetic_kind(a: "Symbol", b: "Symbol") -> str:
    return "float" if "float" in (a.kind, b.kind) else "int"


class Symbol:
    """A value computed from the traced arguments: its text in the modifier language, its type
    (int, float or bool), its C++ precedence level, its Python value where it is a number the
    trace folded (None otherwise), and whether it is known not to be negative (the indices
    are not), which lets // and % of ints be C++'s / and %. torch's functions reach it through
    __torch_function__, which _torch_functions.install() sets."""

    __slots__ = ("text", "kind", "level", "captures", "value", "nonneg")
    __hash__ = None  # == builds an expression

    def __init__(self, text: str, kind: str, level: int, captures: Captures, value=None,
                 nonneg: bool = False):
        self.text, self.kind, self.level, self.captures, self.value = \
            text, kind, level, captures, value
        self.nonneg = nonneg or (value is not None and not isinstance(value, bool) and
                                 value >= 0)

    def __repr__(self):
        return f"<traced {self.kind}: {self.text}>"

    def operand(self, x) -> "Symbol":
        return operand(x, self.captures)

    # Arithmetic, with Python's meaning: / is true division, // floors, % takes the divisor's
    # sign.
    def __add__(self, other):
        other = self.operand(other)
        return binary("+", self, other, SUM, arithmetic_kind(self, other),
                      self.nonneg and other.nonneg)

    def __radd__(self, other):
        return self.operand(other) + self

    def __sub__(self, other):
        other = self.operand(other)
        return binary("-", self, other, SUM, arithmetic_kind(self, other))

    def __rsub__(self, other):
        return self.operand(other) - self

    def __mul__(self, other):
        other = self.operand(other)
        return binary("*", self, other, PRODUCT, arithmetic_kind(self, other),
                      self.nonneg and other.nonneg)

    def __rmul__(self, other):
        return self.operand(other) * self

    def __truediv__(self, other):
        other = self.operand(other)
        numerator = self if "float" in (self.kind, other.kind) else self.float()
        return binary("/", numerator, other, PRODUCT, "float", self.nonneg and other.nonneg)

    def __rtruediv__(self, other):
        return self.operand(other) / self

    def __floordiv__(self, other):
        other = self.operand(other)
        self._integers(other, "//")
        return floor_divide(self, other)

    def __rfloordiv__(self, other):
        return self.operand(other) // self

    def __mod__(self, other):
        other = self.operand(other)
        self._integers(other, "%")
        return python_remainder(self, other)

    def __rmod__(self, other):
        return self.operand(other) % self

    def __pow__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and 1 <= other <= 4:
            result = self  # a small power is a structural constant: multiplied out
            for _ in range(other - 1):
                result = result * self
            return result
        return call("pow", "float", self, self.operand(other))

    def __rpow__(self, other):
        return call("pow", "float", self.operand(other), self)

    def __neg__(self):
        return unary("-", self, "int" if self.kind == "bool" else self.kind)

    def __pos__(self):
        return self

    def __abs__(self):
        return call("abs", self.kind, self, nonneg=True)

    # Comparisons and logic: & | ^ ~ on booleans are and, or, xor and not (as on torch's
    # boolean tensors); on ints bitwise.
    def __eq__(self, other):
        return binary("==", self, self.operand(other), EQUALITY, "bool")

    def __ne__(self, other):
        return binary("!=", self, self.operand(other), EQUALITY, "bool")

    def __lt__(self, other):
        return binary("<", self, self.operand(other), RELATION, "bool")

    def __le__(self, other):
        return binary("<=", self, self.operand(other), RELATION, "bool")

    def __gt__(self, other):
        return binary(">", self, self.operand(other), RELATION, "bool")

    def __ge__(self, other):
        return binary(">=", self, self.operand(other), RELATION, "bool")

    def _logic(self, other, boolean: Tuple[str, int], integer: Tuple[str, int]) -> "Symbol":
        """self and other under `boolean` (operator, level) when both are booleans, else under
        `integer` on ints."""
        other = self.operand(other)
        if self.kind == other.kind == "bool":
            return binary(boolean[0], self, other, boolean[1], "bool")
        self._integers(other, integer[0])
        return binary(integer[0], self, other, integer[1], "int")

    def __and__(self, other):
        return self._logic(other, ("&&", AND), ("&", BITAND))

    def __or__(self, other):
        return self._logic(other, ("||", OR), ("|", BITOR))

    def __xor__(self, other):
        return self._logic(other, ("!=", EQUALITY), ("^", BITXOR))

    __rand__ = __and__
    __ror__ = __or__
    __rxor__ = __xor__

    def __invert__(self):
        if self.kind == "bool":
            return unary("!", self, "bool")
        self._integers(self, "~")
        return unary("~", self, "int")

    def __lshift__(self, other):
        other = self.operand(other)
        self._integers(other, "<<")
        return binary("<<", self, other, SHIFT, "int")

    def __rshift__(self, other):
        other = self.operand(other)
        self._integers(other, ">>")
        return binary(">>", self, other, SHIFT, "int")

    def _integers(self, other: "Symbol", op: str) -> None:
        if "float" in (self.kind, other.kind):
            raise self.captures.error(
                f"'{op}' on a float has no counterpart in the modifier language (it takes "
                f"ints there); compute it on the indices")

    # What needs a value the trace does not have.
    def __bool__(self):
        raise self.captures.error(
            f"a Python if, and, or, not, chained comparison or bool() needs the value of "
            f"{self.text!r}, which is not known when the function is traced: use "
            f"torch.where(condition, a, b) and the operators & | ~ instead")

    def __float__(self):
        raise self.captures.error(
            f"float() or a math function needs the value of {self.text!r}, which is not known "
            f"when the function is traced: use torch's functions (torch.exp, torch.tanh, ...) "
            f"or the method .float()")

    __int__ = __float__
    __complex__ = __float__

    def __index__(self):
        raise self.captures.error(
            f"indexing a list or tuple (or a numpy array the function does not name itself) "
            f"with {self.text!r}: index a torch tensor or a numpy array of its closure or "
            f"globals instead (it becomes a capture)")

    def __iter__(self):
        raise self.captures.error(f"{self.text!r} is one number, not a sequence")

    def __getitem__(self, index):
        raise self.captures.error(f"{self.text!r} is a number: it cannot be indexed")

    # Tensor methods a modifier uses.
    def float(self):
        return self if self.kind == "float" else call("float", "float", self,
                                                      nonneg=self.nonneg)

    def int(self):
        if self.kind == "int":
            return self
        if re.search(r"\bscore\b", self.text):  # the backward's dual numbers have no int
            raise self.captures.error(
                f"int() of {self.text!r}, a value computed from the score, has no derivative: "
                f"the backward could not differentiate it")
        return call("int", "int", self, nonneg=self.nonneg)

    long = int

    def rsqrt(self):
        return literal(1.0, self.captures) / self.sqrt()

    def sigmoid(self):
        one = literal(1.0, self.captures)
        return one / (one + (-self).exp())

    def abs(self):
        return abs(self)

    def clamp(self, min=None, max=None):
        result = self
        if min is not None:
            result = maximum(result, self.operand(min))
        if max is not None:
            result = minimum(result, self.operand(max))
        return result

    clip = clamp

    def where(self, condition, other):
        """Tensor.where: self where the condition holds, other elsewhere."""
        return where(self.operand(condition), self, self.operand(other))

    def clamp_min(self, min):
        return self.clamp(min=min)

    def clamp_max(self, max):
        return self.clamp(max=max)


#: The language's one-argument functions, as Tensor's methods of their names (x.exp()).
MATH_FUNCTIONS = ("exp", "exp2", "log", "log2", "log1p", "sqrt", "tanh", "sin", "cos")
for _name in MATH_FUNCTIONS:
    setattr(Symbol, _name, lambda self, _function=_name: call(_function, "float", self))


def arguments_of(args, kwargs):
    """The arguments of a torch call, those in tuples and lists included."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, (tuple, list)):
            yield from a
        else:
            yield a


class Indexed:
    """A captured tensor indexed in some of its dimensions (bias[h] of a [heads, n] table);
    indexing the rest gives the element's Symbol."""

    def __init__(self, name: str, shape: tuple, kind: str, indices: List[str],
                 captures: Captures):
        self.name, self.shape, self.kind, self.indices, self.captures = \
            name, shape, kind, indices, captures
        self.rank = len(shape)

    def __getitem__(self, index):
        return index_into(self, index if isinstance(index, tuple) else (index,))

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        partial = next(a for a in arguments_of(args, kwargs or {}) if isinstance(a, Indexed))
        raise partial.captures.error(partial._unfinished())

    def _unfinished(self) -> str:
        return (f"a captured tensor of shape {self.shape} is indexed in {len(self.indices)} of "
                f"its {self.rank} dimensions: index every dimension")


def index_into(target: Indexed, index: tuple):
    captures = target.captures
    for i in index:
        if isinstance(i, (slice, type(Ellipsis))) or i is None:
            raise captures.error("slices, ... and None in an index of a captured tensor: "
                                 "index it with one number per dimension")
    indices = list(target.indices)
    for i in index:
        i = operand(i, captures)
        if i.kind == "float":
            raise captures.error(f"the index {i.text!r} of a captured tensor is a float: index "
                                 f"with ints (// for a floored division)")
        indices.append(i.text)
    if len(indices) > target.rank:
        raise captures.error(f"a captured tensor of shape {target.shape} has {target.rank} "
                             f"dimensions, indexed in {len(indices)}")
    if len(indices) < target.rank:
        return Indexed(target.name, target.shape, target.kind, indices, captures)
    return Symbol(target.name + "".join(f"[{i}]" for i in indices), target.kind, PRIMARY,
                  captures)


def index_tensor(captures: Captures, t, index):
    """t[index] where the index holds Symbols: plain ints select first (a view), the rest index
    the capture."""
    index = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in index):
        t = t[tuple(i if isinstance(i, numbers.Integral) else slice(None) for i in index)]
        index = tuple(i for i in index if not isinstance(i, numbers.Integral))
    if t.dim() == 0:
        t = t.reshape(1)
        index = (literal(0, captures),)
    if t.dim() > 4:
        raise captures.error(f"a captured tensor has rank {t.dim()}; captures have 1 to 4")
    name = captures.tensor(t)
    kind = "float" if t.is_floating_point() else "int"
    return index_into(Indexed(name, tuple(t.shape), kind, [], captures), index)


def operand(x, captures: Captures) -> Symbol:
    """x as a Symbol: a Symbol, a Python or numpy number, or a one-element torch tensor."""
    if isinstance(x, Symbol):
        return x
    if isinstance(x, Indexed):
        raise captures.error(x._unfinished())
    if isinstance(x, (numbers.Number, np.bool_)) and not isinstance(x, complex):
        return captures.scalar(x)
    if is_torch(x):
        if x.numel() != 1:
            raise captures.error(f"a tensor of shape {tuple(x.shape)} is used whole: index it "
                                 f"with the arguments (bias[h, q_idx - kv_idx])")
        return index_tensor(captures, x.reshape(1), (literal(0, captures),))
    raise captures.error(f"a {type(x).__name__} has no counterpart in the modifier language")


def floor_divide(a: Symbol, b: Symbol) -> Symbol:
    """Python's a // b of ints (floored), from C++'s truncating /."""
    one, zero = literal(1, a.captures), literal(0, a.captures)
    if b.value == 0:
        raise a.captures.error("divides by zero")
    if b.value is not None and b.value > 0:  # the sign is in the text: a new sign, a new kernel
        if a.nonneg:
            return binary("/", a, b, PRODUCT, "int", True)
        below = binary("/", binary("+", binary("-", a, b, SUM, "int"), one, SUM, "int"), b,
                       PRODUCT, "int")
        return where(a >= zero, binary("/", a, b, PRODUCT, "int"), below)
    remainder = binary("%", a, b, PRODUCT, "int")
    inexact = (remainder != zero) & ((remainder < zero) != (b < zero))
    return binary("-", binary("/", a, b, PRODUCT, "int"), where(inexact, one, zero), SUM, "int")


def python_remainder(a: Symbol, b: Symbol) -> Symbol:
    """Python's a % b of ints (the divisor's sign), from C++'s truncating %."""
    zero = literal(0, a.captures)
    if b.value == 0:
        raise a.captures.error("divides by zero")
    remainder = binary("%", a, b, PRODUCT, "int", a.nonneg and b.nonneg)
    if b.value is not None and b.value > 0:
        if a.nonneg:
            return remainder
        return binary("%", binary("+", remainder, b, SUM, "int"), b, PRODUCT, "int", True)
    wrong_sign = (remainder != zero) & ((remainder < zero) != (b < zero))
    return where(wrong_sign, binary("+", remainder, b, SUM, "int"), remainder)


def same_kind(a: Symbol, b: Symbol) -> Tuple[Symbol, Symbol]:
    """a and b with an int beside a float made a float (the language's min and max take one
    type)."""
    if "float" in (a.kind, b.kind):
        return a.float(), b.float()
    return a, b


def minimum(a: Symbol, b: Symbol) -> Symbol:
    a, b = same_kind(a, b)
    return call("min", arithmetic_kind(a, b), a, b, nonneg=a.nonneg and b.nonneg)


def maximum(a: Symbol, b: Symbol) -> Symbol:
    a, b = same_kind(a, b)
    return call("max", arithmetic_kind(a, b), a, b, nonneg=a.nonneg or b.nonneg)
