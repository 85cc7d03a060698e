"""Callable modifiers inside a function compiled with torch.compile(fullgraph=True), without a
graph break.

Dynamo must not trace the tracer: its symbolic values are Python objects whose comparisons
dynamo cannot follow. So the trace runs once per compilation as a constant of the graph
(torch._dynamo.assume_constant_result): it yields the modifiers' text, the table of their
numbers, and for each tensor a callable reads, where that tensor lives (a closure cell, a
global, or an attribute of one). The graph then reads those tensors through a small function
that shares the callable's cells and globals, so dynamo makes them inputs of the graph (a
learnable table keeps its gradient) and guards on them; the numbers the callable reads from its
cells and globals are compared with the ones traced, so a new value recompiles instead of
running a stale table.

Only functions defined outside the compiled function have the cells and globals to read; for
the others (a function defined inside it, a method, a tensor found elsewhere) plan() is None
and the caller traces eagerly, a graph break."""

import numbers
import types
from typing import Optional

from ._symbols import SCALARS, Captures

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

# A traced function keeps the reader of each path it reads under this prefix and the path.
_READER = "_flashjit_read"


def _assume_constant(function):
    dynamo = getattr(torch, "_dynamo", None) if torch is not None else None
    decorate = getattr(dynamo, "assume_constant_result", None)
    return decorate(function) if decorate else function


def readable(function) -> bool:
    """Whether torch.compile hands `function` over as the function object itself: a function
    defined outside the compiled function (not a method, a functools.partial or a callable
    object). A string, or None, needs no reading.
    (Dynamo cannot name a function it made itself, one defined inside the compiled function: it
    breaks the graph at that name, so such a callable is traced eagerly instead of reaching
    plan(), which could not take it.)"""
    if not callable(function):
        return True
    if not hasattr(function, "__code__") or hasattr(function, "__self__"):
        return False  # a functools.partial, a method, a callable object: traced eagerly
    named = bool(function.__name__ + "")
    return named and hasattr(function, "__globals__")


def _sources(function):
    """(path, value) of what `function` may read: its closure cells and the globals it names
    by path ("cell"/"global", name), and one attribute deep of those, (kind, name, attribute),
    for the names its code uses."""
    code = function.__code__
    found = []
    for name, cell in zip(code.co_freevars, function.__closure__ or ()):
        try:
            found.append((("cell", name), cell.cell_contents))
        except ValueError:  # a cell not yet filled
            continue
    found += [(("global", name), function.__globals__[name]) for name in code.co_names
              if name in function.__globals__]
    deeper = []
    for path, value in found:
        if isinstance(value, (types.ModuleType, type, numbers.Number, str)) or callable(value) \
                and not isinstance(value, torch.nn.Module):
            continue
        for attribute in code.co_names:
            inner = getattr(value, attribute, None)
            if torch.is_tensor(inner):
                deeper.append(((*path, attribute), inner))
    return found + deeper


# One reader per path, made from these templates: their cells are the callable's and the names
# they look up (co_names, in the order written) are the callable's, so nothing is compiled.
def _cell_template():
    value = None
    return lambda: value


def _cell_attribute_template():
    value = None
    return lambda: value.ATTRIBUTE


GLOBAL = None  # the templates' placeholder global: a reader looks up the callable's


def _global_template():
    return GLOBAL


def _global_attribute_template():
    return GLOBAL.ATTRIBUTE


_CELL_CODE = _cell_template().__code__
_CELL_ATTRIBUTE_CODE = _cell_attribute_template().__code__


def _reader(function, path) -> types.FunctionType:
    """A function of no arguments returning the value at `path`, reading `function`'s cell or
    global as the callable does: dynamo follows it as it would the callable's own read."""
    kind, name, *attribute = path
    if kind == "cell":
        cell = dict(zip(function.__code__.co_freevars, function.__closure__))[name]
        code = _CELL_ATTRIBUTE_CODE.replace(co_names=tuple(attribute)) if attribute \
            else _CELL_CODE
        return types.FunctionType(code, function.__globals__, "read", None, (cell,))
    template = _global_attribute_template if attribute else _global_template
    code = template.__code__.replace(co_names=(name, *attribute))
    return types.FunctionType(code, function.__globals__, "read")


def _reader_name(function, path) -> str:
    """The attribute of `function` holding the reader of `path` (made once: dynamo guards on
    it being the same object)."""
    attribute = f"{_READER}:{':'.join(path)}"
    if attribute not in function.__dict__:
        setattr(function, attribute, _reader(function, path))
    return attribute


@_assume_constant
def plan(texts, score_mod, mask_mod) -> Optional[tuple]:
    """What in_graph() needs, all constants: (score text, mask text, captures as (name, which
    callable, reader attribute, dtype it is converted to or ""), the numbers' table, and the
    numbers read from cells and globals as (which, reader attribute, value)); None where a
    tensor the callables read is not found in their cells and globals."""
    found = Captures()
    score_text, mask_text = texts(score_mod, mask_mod, found)
    functions = [m if callable(m) else None for m in (score_mod, mask_mod)]
    sources = [(which, path, value) for which, f in enumerate(functions) if f is not None
               for path, value in _sources(f)]
    captures = []
    for (name, converted), (original, _) in zip(found.tensors, found.originals):
        where = next(((w, p) for w, p, value in sources if value is original), None)
        if where is None:
            return None
        dtype = "" if converted.dtype == original.dtype else str(converted.dtype)[6:]
        captures.append((name, where[0], _reader_name(functions[where[0]], where[1]), dtype))
    expected = tuple((w, _reader_name(functions[w], p), v) for w, p, v in sources
                     if len(p) == 2 and isinstance(v, (bool, int, float)))
    return score_text, mask_text, tuple(captures), tuple(found.scalars), expected


def in_graph(texts, score_mod, mask_mod, like) -> Optional[tuple]:
    """modifiers()'s (score text, mask text, captures) for callables traced inside a compiled
    function, or None where plan() is (the caller then traces eagerly). `texts(score_mod,
    mask_mod, captures)` is the tracer."""
    planned = plan(texts, score_mod, mask_mod)
    if planned is None:
        return None
    score_text, mask_text, captures, scalars, expected = planned
    functions = (score_mod, mask_mod)
    for which, reader, value in expected:  # a guard: a new value compiles the graph again
        if getattr(functions[which], reader)() != value:
            raise RuntimeError("flashjit: a number a modifier reads changed during its trace")
    pairs = []
    for name, which, reader, dtype in captures:
        tensor = getattr(functions[which], reader)()
        pairs.append((name, tensor.to(getattr(torch, dtype)) if dtype else tensor))
    if scalars:
        pairs.append((SCALARS, torch.tensor(scalars, dtype=torch.float32, device=like.device)))
    return score_text, mask_text, tuple(pairs)
