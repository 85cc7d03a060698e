"""What the attention calls share: their options, the captures of score_mod and mask_mod, the
shape checks, and the C API structs built from them."""

import ctypes
import dataclasses
from typing import Optional, Tuple

import numpy as np

from . import _capi
from ._arrays import Launch, dtype_name, is_torch

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


# The attention options' library names (flashjit_attention's fields) in the Python calls' words,
# for their errors (_capi.check).
ATTENTION_NAMES = {"attention.window_left": "window[0]", "attention.window_right": "window[1]",
                   "attention.scale": "scale", "attention.softcap": "softcap",
                   "attention.sinks": "sinks", "attention.sinks_grad": "sinks",
                   "attention.dropout_p": "dropout_p", "attention.q_descale": "q_descale",
                   "attention.k_descale": "k_descale", "attention.v_descale": "v_descale"}


def sequence_names(fields: dict) -> dict:
    """The error names of a call's Sequences fields (`fields`: field -> the Python argument),
    with the attention options'."""
    return {**ATTENTION_NAMES, **{"sequences." + field: name for field, name in fields.items()}}


@dataclasses.dataclass(frozen=True)
class Options:
    """The options of an attention call, as its keywords name them; fill() puts them into the
    C API's struct, checking each first."""

    causal: bool = False
    window: Tuple[int, int] = (-1, -1)
    softcap: float = 0.0
    scale: Optional[float] = None
    deterministic: bool = False
    score_mod: str = ""
    mask_mod: str = ""
    captures: tuple = ()  # (name, array) pairs: Attention::captures
    sinks: object = None  # float32 [heads_q] logits (an array), or None: Attention::sinks
    # Attention::dropout_p, dropout_seed, dropout_offset (the seed drawn by the call: the
    # backward needs the forward's).
    dropout_p: float = 0.0
    dropout_seed: int = 0
    dropout_offset: int = 0

    def __post_init__(self):
        if len(self.window) != 2:
            raise ValueError(f"'window' must be (left, right), not {self.window!r}")

    def flags(self) -> tuple:
        """The options the custom operators take, in their order: causal, window_left,
        window_right, softcap, scale (None: 1/sqrt(head_dim)) and deterministic."""
        scale = None if self.scale is None else float(self.scale)
        return (bool(self.causal), int(self.window[0]), int(self.window[1]), float(self.softcap),
                scale, bool(self.deterministic))

    @staticmethod
    def of_flags(causal, window_left, window_right, softcap, scale, deterministic) -> "Options":
        """The options of flags()'s tuple."""
        return Options(causal, (window_left, window_right), softcap, scale, deterministic)

    def fill(self, a: _capi.flashjit_attention) -> None:
        a.causal = int(bool(self.causal))
        a.window_left, a.window_right = (int(w) for w in self.window)
        if self.scale is not None and not self.scale > 0:
            raise ValueError(f"'scale' must be positive (or None for 1/sqrt(head_dim)), "
                             f"not {self.scale!r}")
        a.scale = 0.0 if self.scale is None else float(self.scale)
        if not self.softcap >= 0:
            raise ValueError(f"'softcap' must be >= 0 (0: off), not {self.softcap!r}")
        a.softcap = float(self.softcap)
        a.deterministic = int(bool(self.deterministic))
        if not 0 <= self.dropout_p < 1:
            raise ValueError(f"'dropout_p' must be in [0, 1) (0: none), not {self.dropout_p!r}")
        for name in ("dropout_seed", "dropout_offset"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or not 0 <= value < 2 ** 63:
                raise ValueError(f"'{name}' must be an int in [0, 2**63), not {value!r}")
        a.dropout_p = float(self.dropout_p)
        a.dropout_seed, a.dropout_offset = int(self.dropout_seed), int(self.dropout_offset)
        for name in ("score_mod", "mask_mod"):
            text = getattr(self, name)
            if not isinstance(text, str):
                raise TypeError(f"'{name}' must be a str (an expression of the modifier "
                                f"language) or a callable, not {type(text).__name__}")
            # The struct keeps the bytes alive for the call.
            setattr(a, name, text.encode() if text else None)


def operator_modifiers(options: Options) -> tuple:
    """The modifiers as the custom operators take them: score_mod, mask_mod, the captures'
    names comma-separated (schemas have no list of str) and their tensors."""
    return (options.score_mod, options.mask_mod, ",".join(name for name, _ in options.captures),
            [x for _, x in options.captures])


def operator_options(flags: tuple, score_mod: str, mask_mod: str, capture_names: str,
                     captures, sinks=None, dropout=(0.0, 0, 0)) -> Options:
    """The Options of a custom operator's arguments: flags(), operator_modifiers(), the sinks
    and the dropout (p, seed, offset)."""
    names = capture_names.split(",") if capture_names else []
    return dataclasses.replace(Options.of_flags(*flags), score_mod=score_mod, mask_mod=mask_mod,
                               captures=tuple(zip(names, captures)), sinks=sinks,
                               dropout_p=dropout[0], dropout_seed=dropout[1],
                               dropout_offset=dropout[2])


def drawn_dropout_seed(seed, dropout_p: float, like) -> int:
    """The seed of a call's dropout: `seed` when given, else one drawn from the generator of
    `like`'s kind (torch's default generator for a torch tensor, numpy's global one for an
    array), so torch.manual_seed or np.random.seed makes a run repeat and each call draws a new
    mask; 0 without dropout."""
    if seed is not None or not dropout_p:
        return 0 if seed is None else seed
    if is_torch(like):
        return int(torch.randint(0, 2 ** 62, (), dtype=torch.int64).item())
    return int(np.random.randint(0, 2 ** 62, dtype=np.int64))


def capture_gradients(captures, wanted):
    """Zeroed float32 buffers for the captures whose `wanted` is true (None for the others):
    where a modifier operator's backward adds their gradients."""
    return [torch.zeros_like(x, dtype=torch.float32) if w else None
            for x, w in zip(captures, wanted)]


def captures_of(captures) -> tuple:
    """The `captures=` argument (a dict of name to array, or None) as (name, array) pairs."""
    if captures is None:
        return ()
    if not isinstance(captures, dict):
        raise TypeError(f"'captures' must be a dict of name to array, not "
                        f"{type(captures).__name__}")
    for name in captures:
        if not isinstance(name, str):
            raise TypeError(f"'captures' keys must be str (the names the expressions use), not "
                            f"{type(name).__name__}")
    return tuple(captures.items())


def capture_inputs(options, grads=None, sinks_grad=None) -> dict:
    """The captures as Launch inputs, named "captures.<name>", and the float32 arrays their
    gradients are added into (`grads`: name to array), named "capture_grads.<name>"; the sinks
    ("sinks") and the array their gradient is written into ("sinks_grad"), where given."""
    inputs = {f"captures.{name}": array for name, array in options.captures}
    inputs.update({f"capture_grads.{name}": g for name, g in (grads or {}).items()})
    if options.sinks is not None:
        inputs["sinks"] = options.sinks
    if sinks_grad is not None:
        inputs["sinks_grad"] = sinks_grad
    return inputs


def bind_captures(a: _capi.flashjit_attention, launch: Launch, options, grads=None,
                  sinks_grad=None) -> None:
    """Points a.captures at the launch's views of the captures (kept alive by the launch), with
    the gradients of those in `grads` (written back by launch.write_back()); a.sinks and
    a.sinks_grad likewise (capture_inputs() named them)."""
    if options.sinks is not None:
        a.sinks = _capi.field_pointer(launch.input("sinks"))
    if sinks_grad is not None:
        a.sinks_grad = _capi.field_pointer(launch.updated("sinks_grad"))
    if not options.captures:
        return
    entries = (_capi.flashjit_capture * len(options.captures))()
    for entry, (name, _) in zip(entries, options.captures):
        entry.name = name.encode()
        entry.tensor = launch.input(f"captures.{name}")
        if grads and name in grads:
            entry.grad = _capi.field_pointer(launch.updated(f"capture_grads.{name}"))
    launch._keep.append(entries)
    a.captures = ctypes.cast(entries, ctypes.POINTER(_capi.flashjit_capture))
    a.num_captures = len(options.captures)


def shape_of(name: str, x, rank: int, layout: str):
    """x's shape as ints, after checking that x is an array flashjit takes, of `rank` (else a
    ValueError names `name` and `layout`)."""
    dtype_name(name, x)  # a numpy array or torch tensor of a dtype flashjit takes
    if x.ndim != rank:
        raise ValueError(f"'{name}' must be {layout} (rank {rank}), not shape {tuple(x.shape)}")
    return tuple(map(int, x.shape))


def call_options(options: Options, batch, heads_q, heads_kv, seqlen_q, seqlen_k,
                 head_dim) -> _capi.flashjit_attention:
    """The C API's flashjit_attention for a call of these sizes with `options`."""
    a = _capi.flashjit_attention()
    _capi.library().flashjit_attention_init(ctypes.byref(a))
    a.batch, a.heads_q, a.heads_kv = int(batch), int(heads_q), int(heads_kv)
    a.seqlen_q, a.seqlen_k, a.head_dim = int(seqlen_q), int(seqlen_k), int(head_dim)
    options.fill(a)
    return a


def element(x) -> str:
    """The element type of q (the outputs' and gradients' type)."""
    return dtype_name("q", x)


def wants_grad(*tensors) -> bool:
    """Whether autograd records a call with these arrays (a torch tensor among them requires
    grad, and grad mode is on)."""
    return (torch is not None and torch.is_grad_enabled() and
            any(is_torch(t) and t.requires_grad for t in tensors))


def int32_full(like, count: int, value: int):
    """An int32 array of `count` entries, each `value`, of `like`'s kind (numpy or torch) and on
    its device."""
    if is_torch(like):
        return torch.full((count,), value, dtype=torch.int32, device=like.device)
    return np.full((count,), value, dtype=np.int32)


def sequences_of(launch: Launch, splits: int = 0, **arrays) -> _capi.flashjit_sequences:
    """The C API's Sequences with each field in `arrays` (field = launch input name) pointing at
    that input's view, and `splits` split-KV blocks (0: the library chooses)."""
    sequences = _capi.flashjit_sequences()
    _capi.library().flashjit_sequences_init(ctypes.byref(sequences))
    for field, name in arrays.items():
        setattr(sequences, field, _capi.field_pointer(launch.input(name)))
    sequences.splits = int(splits)
    return sequences


def float32(table):
    """A rotary table or descale factors as float32 (the library's dtype for them), or None."""
    if table is None or not (is_torch(table) or isinstance(table, np.ndarray)):
        return table
    return table.float() if is_torch(table) else np.asarray(table, dtype=np.float32)
