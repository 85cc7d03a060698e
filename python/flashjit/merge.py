"""Merging partial attention states (split-KV, cascade or context-parallel attention)."""

from typing import Tuple

import numpy as np

from . import _capi, _custom_ops
from ._arrays import Launch, dtype_name, is_torch

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _merge(v, s):
    """merge_states() on any arrays."""
    dtype_name("v", v)
    dtype_name("s", s)
    if v.ndim != 4:
        raise ValueError(f"'v' must be [tokens, num_states, heads, head_dim], not shape "
                         f"{tuple(v.shape)}")
    if s.ndim != 3:
        raise ValueError(f"'s' must be [tokens, num_states, heads], not shape {tuple(s.shape)}")
    # The C API takes the states first: [num_states, tokens, heads, ...].
    partial_o = v.transpose(0, 1) if is_torch(v) else np.swapaxes(v, 0, 1)
    partial_lse = s.transpose(0, 1) if is_torch(s) else np.swapaxes(s, 0, 1)
    tokens, heads, head_dim = v.shape[0], v.shape[2], v.shape[3]
    with Launch({"v": partial_o, "s": partial_lse}) as launch:
        o = launch.output("o", (tokens, heads, head_dim), dtype_name("v", v))
        lse = launch.output("lse", (tokens, heads), "f32")
        _capi.check(_capi.library().flashjit_merge_states(
            launch.runtime.handle, _capi.pointer(launch.input("v")),
            _capi.pointer(launch.input("s")), _capi.pointer(o), _capi.pointer(lse),
            launch.stream))
        return launch.result("o"), launch.result("lse")


if _custom_ops.AVAILABLE:
    from torch import Tensor

    def _fake(v, s):
        tokens, _, heads, head_dim = v.shape
        return (v.new_empty((tokens, heads, head_dim)),
                v.new_empty((tokens, heads), dtype=torch.float32))

    @_custom_ops.define("merge_states", _fake)
    def _merge_op(v: Tensor, s: Tensor) -> Tuple[Tensor, Tensor]:
        return _merge(v, s)


def merge_states(v, s):
    """The exact attention state over the union of disjoint key sets from the states over each:
    v is [tokens, num_states, heads, head_dim] (outputs; float16, bfloat16 or float32), s
    [tokens, num_states, heads] float32, their natural-log LSEs (as attention(...,
    return_lse=True) gives, transposed to tokens first). Returns (v_merged [tokens, heads,
    head_dim] in v's dtype, s_merged [tokens, heads] float32): s_merged = log Σ exp(s_i),
    v_merged = Σ exp(s_i − s_merged) v_i. FlashInfer's merge_states layout (whose LSEs are
    base 2: multiply them by ln 2 first). A state with s = −inf adds nothing. Not
    differentiable. With PyTorch 2.4 or later, torch tensors go through the custom operator
    flashjit::merge_states, which torch.compile traces whole."""
    if _custom_ops.takes(v, s):
        return _merge_op(v, s)
    return _merge(v, s)
