"""Python callables as score and mask modifiers, FlexAttention's score_mod(score, b, h, q_idx,
kv_idx) and mask_mod(b, h, q_idx, kv_idx). A callable is called once per call with symbolic
arguments; what it computes from them is recorded as an expression of flashjit's modifier
language (docs/modifiers.md), which the library parses and compiles like a string modifier.

The tensors it indexes become captures (`tensor0`, `tensor1`, ...). The Python numbers it uses
become entries of one captured float32 table (`scalars`), read where they are used, so that a
function whose numbers change (a soft cap, a window, a document length) keeps its text and
runs the kernel already compiled. What the modifier language cannot express (a Python `if` on
an argument, math.exp, a float floor division) is refused with a ValueError naming the
modifier before anything is compiled."""

import inspect
import numbers
import types
from typing import Optional, Tuple

import numpy as np

from . import _torch_functions, _trace_in_graph
from ._arrays import is_torch
from ._symbols import PRIMARY, SCALARS, Captures, Indexed, Symbol, operand, torch_compiling

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

_torch_functions.install()  # torch's functions on traced values


def trace(function, name: str, captures: Captures) -> str:
    """The modifier language's text of `function` (score_mod: (score, b, h, q_idx, kv_idx) ->
    score; mask_mod: (b, h, q_idx, kv_idx) -> bool), its tensors and numbers added to
    `captures`."""
    parameters = ("score", "b", "h", "q_idx", "kv_idx")[name == "mask_mod":]
    try:
        inspect.signature(function).bind(*parameters)
    except TypeError:
        raise ValueError(f"'{name}' must take the arguments ({', '.join(parameters)}), as "
                         f"FlexAttention's {name} does") from None
    except ValueError:  # a builtin without a signature: let the call say
        pass
    captures.owner = name
    symbols = [Symbol(p, "float" if p == "score" else "int", PRIMARY, captures,
                      nonneg=p != "score") for p in parameters]
    result = _reading_arrays_as_tensors(function, captures)(*symbols)
    if isinstance(result, Indexed):
        raise captures.error(result._unfinished())
    if name == "mask_mod":
        if isinstance(result, (bool, np.bool_)):
            return "true" if result else "false"
        if not isinstance(result, Symbol) or result.kind != "bool":
            raise captures.error("must return a boolean: a comparison of its arguments, or & "
                                 "| ~ of comparisons")
        return result.text
    if not isinstance(result, Symbol) and not isinstance(result, numbers.Real) and \
            not is_torch(result):
        raise captures.error(f"must return a number computed from its arguments, not a "
                             f"{type(result).__name__}")
    return operand(result, captures).text


def _reading_arrays_as_tensors(function, captures: Captures):
    """`function`, or where it reads numpy arrays from its closure or its globals a copy that
    reads them as torch tensors sharing their memory (numpy has no hook for an index that is
    a Symbol; torch's __torch_function__ does). The arrays so read are noted in `captures`,
    which gives them back in the call's kind (_in_kind_of)."""
    code = getattr(function, "__code__", None)
    if torch is None or code is None or not isinstance(function, types.FunctionType):
        return function
    as_tensor = {}

    def tensor_of(value):
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
            return value
        if id(value) not in as_tensor:
            as_tensor[id(value)] = torch.as_tensor(value)
            captures.from_numpy.add(id(as_tensor[id(value)]))
        return as_tensor[id(value)]
    names = {n: tensor_of(function.__globals__[n]) for n in code.co_names
             if n in function.__globals__}
    cells = tuple(types.CellType(tensor_of(c.cell_contents)) if _holds_array(c) else c
                  for c in function.__closure__ or ())
    if not as_tensor:
        return function
    copy = types.FunctionType(code, {**function.__globals__, **names}, function.__name__,
                              function.__defaults__, cells or None)
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


def _holds_array(cell) -> bool:
    try:
        return isinstance(cell.cell_contents, np.ndarray)
    except ValueError:  # an empty cell
        return False


def _in_kind_of(pairs, found: Captures, like) -> tuple:
    """The captured tensors that were numpy arrays as `like`'s kind: numpy for a numpy call,
    torch on like's device for a torch one."""
    converted = []
    for name, t in pairs:
        if id(t) in found.from_numpy or any(id(o) in found.from_numpy
                                            for o, n in found.originals if n == name):
            t = t.numpy() if not is_torch(like) else t.to(like.device)
        converted.append((name, t))
    return tuple(converted)


def modifiers(score_mod, mask_mod, captures, like) -> Tuple[str, str, tuple]:
    """score_mod and mask_mod as the modifier language's text, and the call's captures as
    (name, array) pairs: strings and the `captures` dict as given, callables traced (their
    captures found by the trace, on `like`'s device)."""
    from ._options import captures_of

    score_mod = "" if score_mod is None else score_mod  # FlexAttention's "no modifier"
    mask_mod = "" if mask_mod is None else mask_mod
    if not (callable(score_mod) or callable(mask_mod)):
        return score_mod, mask_mod, captures_of(captures)
    if captures is not None:
        raise ValueError("'captures' names the tensors of modifiers given as text; a callable "
                         "modifier's tensors are found by its trace: index them in the "
                         "function")
    if torch_compiling() and _trace_in_graph.readable(score_mod) and \
            _trace_in_graph.readable(mask_mod):
        traced = _trace_in_graph.in_graph(_texts, score_mod, mask_mod, like)
        if traced is not None:
            return traced
    return _trace_outside_torch_compile(score_mod, mask_mod, like)


def _texts(score_mod, mask_mod, found: Captures) -> list:
    """Both modifiers' texts: callables traced (what they read added to `found`), the rest as
    they are."""
    texts = [trace(m, name, found) if callable(m) else m
             for m, name in ((score_mod, "score_mod"), (mask_mod, "mask_mod"))]
    found.check_count()
    return texts


def _trace_both(score_mod, mask_mod, like) -> Tuple[str, str, tuple]:
    found = Captures()
    texts = _texts(score_mod, mask_mod, found)
    pairs = list(_in_kind_of(found.tensors, found, like))
    table = found.table(like)
    if table is not None:
        pairs.append((SCALARS, table))
    return texts[0], texts[1], tuple(pairs)


# torch.compile must not trace the tracer: its symbolic values are Python objects whose
# comparisons it cannot follow. Inside a compiled function, callables defined outside it are
# traced as a constant of the graph (_trace_in_graph); the others eagerly, a graph break.
_disable = getattr(getattr(torch, "compiler", None), "disable", None)
_trace_outside_torch_compile = _disable(_trace_both) if _disable else _trace_both


def trace_modifiers(score_mod=None, mask_mod=None, *, like) -> dict:
    """FlexAttention-style callables traced into flashjit's modifier language, as the keyword
    arguments of attention() and its siblings: {"score_mod": text, "mask_mod": text,
    "captures": {name: tensor}} (a string is passed through; None is no modifier). `like` is
    the call's q (the table of the callables' numbers is made on its device). The result may
    be reused while the tensors the callables read and their numbers stay as they were.

    Tracing happens inside every call given a callable (inside a compiled function, once per
    compilation, for a callable defined outside it). For callables torch.compile cannot hand
    over (defined inside the compiled function, methods), call this ahead so that its graph
    holds the custom operator and the captures only: `flashjit.attention(q, k, v, **mods)`."""
    score_text, mask_text, captured = modifiers(score_mod, mask_mod, None, like)
    return {"score_mod": score_text, "mask_mod": mask_text,
            "captures": dict(captured) if captured else None}


def text_of(score_mod=None, mask_mod=None) -> Tuple[Optional[str], Optional[str]]:
    """The text a callable modifier traces to (for reading and debugging; strings are
    returned as they are)."""
    return tuple(_texts(score_mod, mask_mod, Captures()))
