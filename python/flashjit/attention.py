"""Attention calls shaped as FlashAttention's: dense batches [batch, seqlen, heads, head_dim],
packed variable-length batches [total, heads, head_dim] with cu_seqlens, and decoding on dense
or paged KV caches. LSEs are natural-log, [batch, heads, seqlen] (packed: [heads, total])."""

import ctypes
import dataclasses
from typing import Optional, Tuple

import numpy as np

from . import _capi, _custom_ops
from ._arrays import Launch, dtype_name, is_torch

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


@dataclasses.dataclass(frozen=True)
class _Options:
    causal: bool = False
    window: Tuple[int, int] = (-1, -1)
    softcap: float = 0.0
    scale: Optional[float] = None
    deterministic: bool = False
    score_mod: str = ""
    mask_mod: str = ""
    captures: tuple = ()  # (name, array) pairs: Attention::captures

    def __post_init__(self):
        if len(self.window) != 2:
            raise ValueError(f"'window' must be (left, right), not {self.window!r}")

    def fill(self, a: _capi.AttentionOptions) -> None:
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
        for name in ("score_mod", "mask_mod"):
            text = getattr(self, name)
            if not isinstance(text, str):
                raise TypeError(f"'{name}' must be a str (a C++ expression), not "
                                f"{type(text).__name__}")
            # The struct keeps the bytes alive for the call.
            setattr(a, name, text.encode() if text else None)


def _captures_of(captures) -> tuple:
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


def _capture_inputs(options, grads=None) -> dict:
    """The captures as Launch inputs, named "captures.<name>", and the float32 arrays their
    gradients are added into (`grads`: name to array), named "capture_grads.<name>"."""
    inputs = {f"captures.{name}": array for name, array in options.captures}
    inputs.update({f"capture_grads.{name}": g for name, g in (grads or {}).items()})
    return inputs


def _bind_captures(a: _capi.AttentionOptions, launch: Launch, options, grads=None) -> None:
    """Points a.captures at the launch's views of the captures (kept alive by the launch), with
    the gradients of those in `grads` (written back by launch.write_back())."""
    if not options.captures:
        return
    entries = (_capi.Capture * len(options.captures))()
    for entry, (name, _) in zip(entries, options.captures):
        entry.name = name.encode()
        entry.tensor = launch.input(f"captures.{name}")
        if grads and name in grads:
            entry.grad = _capi.pointer(launch.updated(f"capture_grads.{name}"))
    launch._keep.append(entries)
    a.captures = ctypes.cast(entries, ctypes.c_void_p)
    a.num_captures = len(options.captures)


def _shape(name: str, x, rank: int, layout: str):
    dtype_name(name, x)  # a numpy array or torch tensor of a dtype flashjit takes
    if x.ndim != rank:
        raise ValueError(f"'{name}' must be {layout} (rank {rank}), not shape {tuple(x.shape)}")
    return tuple(int(s) for s in x.shape)


def _call_options(options: _Options, batch, heads_q, heads_kv, seqlen_q, seqlen_k,
                  head_dim) -> _capi.AttentionOptions:
    """The C API's flashjit_attention for a call of these sizes with `options`."""
    a = _capi.AttentionOptions()
    _capi.library().flashjit_attention_init(ctypes.byref(a))
    a.batch, a.heads_q, a.heads_kv = int(batch), int(heads_q), int(heads_kv)
    a.seqlen_q, a.seqlen_k, a.head_dim = int(seqlen_q), int(seqlen_k), int(head_dim)
    options.fill(a)
    return a


def _dense_options(q, k, v, options: _Options) -> _capi.AttentionOptions:
    layout = "[batch, seqlen, heads, head_dim]"
    b, sq, hq, d = _shape("q", q, 4, layout)
    _, sk, hk, _ = _shape("k", k, 4, layout)
    value_dim = _shape("v", v, 4, layout)[3]
    a = _call_options(options, b, hq, hk, sq, sk, d)
    a.head_dim_v = value_dim if value_dim != d else 0  # MLA: v narrower than q and k
    return a


def _element(x) -> str:
    return dtype_name("q", x)


def _forward(q, k, v, options: _Options, block_mask=None):
    a = _dense_options(q, k, v, options)
    with Launch({"q": q, "k": k, "v": v, "block_mask": block_mask,
                 **_capture_inputs(options)}) as launch:
        _bind_captures(a, launch, options)
        a.block_mask = _capi.pointer(launch.input("block_mask"))
        o = launch.output("o", (*q.shape[:3], v.shape[3]), _element(q))
        lse = launch.output("lse", (a.batch, a.heads_q, a.seqlen_q), "f32")
        _capi.check(_capi.library().flashjit_attention_forward(
            launch.runtime.handle, ctypes.byref(a), _capi.pointer(launch.input("q")),
            _capi.pointer(launch.input("k")), _capi.pointer(launch.input("v")),
            _capi.pointer(o), _capi.pointer(lse), launch.stream))
        return launch.result("o"), launch.result("lse")


def _backward(dout, q, k, v, o, lse, options: _Options, capture_grads=None, block_mask=None):
    a = _dense_options(q, k, v, options)
    with Launch({"dout": dout, "q": q, "k": k, "v": v, "o": o, "lse": lse,
                 "block_mask": block_mask, **_capture_inputs(options, capture_grads)}) as launch:
        _bind_captures(a, launch, options, capture_grads)
        a.block_mask = _capi.pointer(launch.input("block_mask"))
        dq = launch.output("dq", q.shape, _element(q))
        dk = launch.output("dk", k.shape, _element(q))
        dv = launch.output("dv", v.shape, _element(q))
        _capi.check(_capi.library().flashjit_attention_backward(
            launch.runtime.handle, ctypes.byref(a), *[_capi.pointer(launch.input(n)) for n in
                                                      ("q", "k", "v", "o", "lse", "dout")],
            _capi.pointer(dq), _capi.pointer(dk), _capi.pointer(dv), launch.stream))
        launch.write_back()  # the captures' gradients, on the emulator
        return launch.result("dq"), launch.result("dk"), launch.result("dv")


if torch is not None:

    class _AttentionFunction(torch.autograd.Function):
        """attention() with its gradients from the backward kernels (LSE recomputation); the
        captures' tensors come last, so that those requiring grad get theirs."""

        @staticmethod
        def forward(ctx, q, k, v, options, block_mask, *capture_tensors):
            o, lse = _forward(q, k, v, options, block_mask)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.options = options
            ctx.block_mask = block_mask  # the backward skips the same blocks
            ctx.mark_non_differentiable(lse)
            return o, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            q, k, v, o, lse = ctx.saved_tensors
            captures = ctx.options.captures
            grads = {name: torch.zeros_like(x, dtype=torch.float32)
                     for i, (name, x) in enumerate(captures) if ctx.needs_input_grad[5 + i]}
            dq, dk, dv = _backward(dout.contiguous(), q, k, v, o, lse, ctx.options, grads,
                                   ctx.block_mask)
            return (dq, dk, dv, None, None,
                    *[grads[name].to(x.dtype) if name in grads else None
                      for name, x in captures])


def _options_of(causal, window_left, window_right, softcap, scale, deterministic) -> _Options:
    return _Options(causal, (window_left, window_right), softcap, scale, deterministic)


_custom_ops.register(_forward, _backward, _options_of)


def _wants_grad(*tensors) -> bool:
    return (torch is not None and torch.is_grad_enabled() and
            any(is_torch(t) and t.requires_grad for t in tensors))


def attention(q, k, v, *, causal: bool = False, window: Tuple[int, int] = (-1, -1),
              softcap: float = 0.0, scale: Optional[float] = None, deterministic: bool = False,
              return_lse: bool = False, score_mod: str = "", mask_mod: str = "",
              block_mask=None, captures: Optional[dict] = None):
    """Attention over a dense batch, FlashAttention's flash_attn_func.

    q is [batch, seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim]
    (heads_q a multiple of heads_kv: GQA/MQA), head_dim a multiple of 8 up to 256; v may be
    narrower, [..., head_dim_v] with head_dim_v a multiple of 8 up to head_dim (MLA: 192 and
    128), and o then has its width; numpy float16 or torch float16/bfloat16, all on one device
    (host memory runs on the CPU emulator, a CUDA tensor on its GPU, on the current stream).
    `causal` aligns the mask bottom-right; `window` is (left, right) keys around the diagonal,
    -1 unbounded; `softcap` > 0 caps the scores with softcap * tanh(s / softcap); `scale`
    defaults to 1/sqrt(head_dim). torch tensors that require grad get gradients from flashjit's
    backward (`deterministic`: the same bits on every run). Returns o like q (v's head dim), and
    with `return_lse` also the natural-log LSE, float32 [batch, heads_q, seqlen_q] (not
    differentiated). A bad argument raises ValueError naming it; nothing is launched then. With
    PyTorch 2.4 or later, torch tensors go through the custom operator
    flashjit::attention_forward, which torch.compile traces without a graph break.

    `score_mod` and `mask_mod` are C++ expressions compiled into the kernel (docs/modifiers.md):
    the score the softmax sees, from `score` (scaled, soft-capped), `b`, `h`, `q_idx` and
    `kv_idx`; and whether query q_idx sees key kv_idx. Gradients flow through both (the
    backward evaluates score_mod on dual numbers: write it with operators and unqualified
    functions such as tanhf, expf). `block_mask` (build_block_mask()'s, for this mask_mod and
    these sizes) lets the forward skip the key blocks the mask hides from whole query blocks.
    `captures` maps names to arrays the expressions read (`doc[b][q_idx] == doc[b][kv_idx]`):
    rank 1 to 4, float32/float16/bfloat16 (read as float) or int32, like q (numpy or torch, on
    its device). A torch capture that requires grad gets its gradient (a learnable bias table:
    read it once in score_mod; see docs/modifiers.md)."""
    options = _Options(causal, tuple(window), softcap, scale, deterministic, score_mod, mask_mod,
                       _captures_of(captures))
    if score_mod or mask_mod:
        tensors = [x for _, x in options.captures]
        if _wants_grad(q, k, v, *tensors):
            o, lse = _AttentionFunction.apply(q, k, v, options, block_mask, *tensors)
        else:
            o, lse = _forward(q, k, v, options, block_mask)
    elif block_mask is not None:
        raise ValueError("'block_mask' needs the 'mask_mod' it was built from")
    elif _custom_ops.forward_op is not None and is_torch(q):
        o, lse = _custom_ops.forward_op(q, k, v, bool(causal), int(options.window[0]),
                                        int(options.window[1]), float(softcap),
                                        None if scale is None else float(scale),
                                        bool(deterministic))
    elif _wants_grad(q, k, v):
        o, lse = _AttentionFunction.apply(q, k, v, options, None)
    else:
        o, lse = _forward(q, k, v, options)
    return (o, lse) if return_lse else o


def build_block_mask(mask_mod: str, batch: int, heads_q: int, seqlen_q: int, seqlen_k: int, *,
                     like, captures: Optional[dict] = None):
    """The block mask of `mask_mod` for attention() calls of these sizes (FlexAttention's
    create_block_mask): int32 [batch, heads_q, ceil(seqlen_q / 16), 4], on `like`'s device and
    of its kind (numpy or torch; pass the q of the calls), built once by evaluating the mask for
    every (batch, head, query, key) and reused by every call with that mask_mod and sizes.
    `captures`: the tensors mask_mod reads, as in attention() (the block mask holds what they
    held when it was built)."""
    options = _Options(mask_mod=mask_mod, captures=_captures_of(captures))
    a = _call_options(options, batch, heads_q, 1, seqlen_q, seqlen_k, 64)
    with Launch({"like": like, **_capture_inputs(options)}) as launch:
        _bind_captures(a, launch, options)
        mask = launch.output("block_mask", (batch, heads_q, (seqlen_q + 15) // 16, 4), "i32")
        _capi.check(_capi.library().flashjit_build_block_mask(
            launch.runtime.handle, ctypes.byref(a), _capi.pointer(mask), launch.stream))
        return launch.result("block_mask")


def attention_backward(dout, q, k, v, o, lse, *, causal: bool = False,
                       window: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                       scale: Optional[float] = None, deterministic: bool = False,
                       score_mod: str = "", mask_mod: str = "", block_mask=None,
                       captures: Optional[dict] = None):
    """The gradients (dq, dk, dv) of attention() for its output gradient `dout` (like q), given
    that call's arguments (its score_mod, mask_mod, block_mask and captures included) and its o
    and lse (return_lse=True). For numpy callers, and for torch callers who keep their own
    graph; dk and dv sum over the query heads sharing a key/value head."""
    options = _Options(causal, tuple(window), softcap, scale, deterministic, score_mod, mask_mod,
                       _captures_of(captures))
    if block_mask is not None and not mask_mod:
        raise ValueError("'block_mask' needs the 'mask_mod' it was built from")
    return _backward(dout, q, k, v, o, lse, options, block_mask=block_mask)


def _sequences(launch: Launch, splits: int = 0, **arrays) -> _capi.Sequences:
    sequences = _capi.Sequences()
    _capi.library().flashjit_sequences_init(ctypes.byref(sequences))
    for field, name in arrays.items():
        setattr(sequences, field, _capi.pointer(launch.input(name)))
    sequences.splits = int(splits)
    return sequences


def _varlen_options(q, k, v, cu_seqlens_q, max_seqlen_q, max_seqlen_k, options):
    layout = "[total, heads, head_dim]"
    _, hq, d = _shape("q", q, 3, layout)
    _, hk, _ = _shape("k", k, 3, layout)
    value_dim = _shape("v", v, 3, layout)[2]
    _shape("cu_seqlens_q", cu_seqlens_q, 1, "[batch + 1]")
    a = _call_options(options, cu_seqlens_q.shape[0] - 1, hq, hk, max_seqlen_q, max_seqlen_k, d)
    a.head_dim_v = value_dim if value_dim != d else 0  # MLA: v narrower than q and k
    return a


def _used_counts(used):
    """The launch inputs and Sequences fields of (seqused_q, seqused_k), each possibly None:
    seqused_k is the library's seqlens_k (how many of a sequence's packed keys are used)."""
    inputs, fields = {}, {}
    for name, field, counts in (("seqused_q", "seqused_q", used[0]),
                                ("seqused_k", "seqlens_k", used[1])):
        if counts is not None:
            inputs[name] = counts
            fields[field] = name
    return inputs, fields


def _varlen_forward(q, k, v, cu_q, cu_k, max_q, max_k, options, used=(None, None)):
    a = _varlen_options(q, k, v, cu_q, max_q, max_k, options)
    used_inputs, used_fields = _used_counts(used)
    with Launch({"q": q, "k": k, "v": v, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k,
                 **used_inputs, **_capture_inputs(options)}) as launch:
        _bind_captures(a, launch, options)
        sequences = _sequences(launch, cu_seqlens_q="cu_seqlens_q", cu_seqlens_k="cu_seqlens_k",
                               **used_fields)
        o = launch.output("o", (*q.shape[:2], v.shape[2]), _element(q))
        lse = launch.output("lse", (a.heads_q, q.shape[0]), "f32")
        _capi.check(_capi.library().flashjit_attention_forward_sequences(
            launch.runtime.handle, ctypes.byref(a), ctypes.byref(sequences),
            *[_capi.pointer(launch.input(n)) for n in ("q", "k", "v")], _capi.pointer(o),
            _capi.pointer(lse), launch.stream))
        return launch.result("o"), launch.result("lse")


def _varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k, max_q, max_k, options, used=(None, None)):
    a = _varlen_options(q, k, v, cu_q, max_q, max_k, options)
    used_inputs, used_fields = _used_counts(used)
    with Launch({"dout": dout, "q": q, "k": k, "v": v, "o": o, "lse": lse, "cu_seqlens_q": cu_q,
                 "cu_seqlens_k": cu_k, **used_inputs, **_capture_inputs(options)}) as launch:
        _bind_captures(a, launch, options)
        sequences = _sequences(launch, cu_seqlens_q="cu_seqlens_q", cu_seqlens_k="cu_seqlens_k",
                               **used_fields)
        dq = launch.output("dq", q.shape, _element(q))
        dk = launch.output("dk", k.shape, _element(q))
        dv = launch.output("dv", v.shape, _element(q))
        _capi.check(_capi.library().flashjit_attention_backward_sequences(
            launch.runtime.handle, ctypes.byref(a), ctypes.byref(sequences),
            *[_capi.pointer(launch.input(n)) for n in ("q", "k", "v", "o", "lse", "dout")],
            _capi.pointer(dq), _capi.pointer(dk), _capi.pointer(dv), launch.stream))
        return launch.result("dq"), launch.result("dk"), launch.result("dv")


if torch is not None:

    class _VarlenFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, cu_q, cu_k, max_q, max_k, options, used):
            o, lse = _varlen_forward(q, k, v, cu_q, cu_k, max_q, max_k, options, used)
            ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
            ctx.extra = (max_q, max_k, options, used)
            ctx.mark_non_differentiable(lse)
            return o, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
            max_q, max_k, options, used = ctx.extra
            grads = _varlen_backward(dout.contiguous(), q, k, v, o, lse, cu_q, cu_k, max_q, max_k,
                                     options, used)
            return (*grads, None, None, None, None, None, None)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int,
                     *, causal: bool = False, window: Tuple[int, int] = (-1, -1),
                     softcap: float = 0.0, scale: Optional[float] = None,
                     deterministic: bool = False, return_lse: bool = False, score_mod: str = "",
                     mask_mod: str = "", captures: Optional[dict] = None, seqused_q=None,
                     seqused_k=None):
    """Attention over a packed batch of variable lengths, FlashAttention's
    flash_attn_varlen_func: q is [total_q, heads_q, head_dim], k and v [total_k, heads_kv,
    head_dim], sequence i's rows from cu_seqlens_q[i] (cu_seqlens_k[i]) to the next entry
    (int32 [batch + 1], from 0, nondecreasing), max_seqlen_* the longest; v (and o) may be
    narrower than q and k, as attention() says (MLA's prefill). Options, dtypes,
    devices and gradients as attention(); the LSE is float32 [heads_q, total_q]. The index
    arrays are checked before anything runs (a ValueError names a bad entry). score_mod and
    mask_mod (and captures) as in attention(), with gradients; b is the sequence's index and
    q_idx, kv_idx positions within it.

    seqused_q and seqused_k (int32 [batch], each optional), FlashAttention's: sequence i uses
    only the first seqused_q[i] of its query rows and seqused_k[i] of its key rows (padding
    inside the packed buffers). The sequence is those rows alone (masks align to them); the
    rest is not read, and its rows of o (and of dq, dk, dv) come out 0, of the LSE -inf."""
    options = _Options(causal, tuple(window), softcap, scale, deterministic, score_mod, mask_mod,
                       _captures_of(captures))
    used = (seqused_q, seqused_k)
    if _wants_grad(q, k, v):
        o, lse = _VarlenFunction.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                       max_seqlen_k, options, used)
    else:
        o, lse = _varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                 max_seqlen_k, options, used)
    return (o, lse) if return_lse else o


def attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, *, k=None, v=None,
                           rotary_cos=None, rotary_sin=None, rotary_interleaved: bool = True,
                           cache_batch_idx=None, cache_leftpad=None,
                           block_table=None, causal: bool = False,
                           window: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                           scale: Optional[float] = None, num_splits: int = 0,
                           return_lse: bool = False, score_mod: str = "", mask_mod: str = "",
                           captures: Optional[dict] = None, k_descale=None, v_descale=None):
    """Decoding and chunked prefill against a KV cache, FlashAttention's flash_attn_with_kvcache:
    q is [batch, seqlen_q, heads_q, head_dim]; the cache is dense, [batch, seqlen_cache,
    heads_kv, head_dim], or paged, [num_pages, page_size, heads_kv, head_dim] (any page_size,
    1 included) with block_table int32 [batch, max_pages] naming each sequence's pages;
    cache_seqlens (int32 [batch], or one int for all) the keys each sequence has cached.

    k and v ([batch, seqlen_new, heads_kv, head_dim], q's dtype): new keys and values, written
    into k_cache and v_cache in place at positions cache_seqlens[b] onward before the attention,
    which then sees cache_seqlens[b] + seqlen_new keys (cache_seqlens itself is not changed:
    advance it yourself). rotary_cos and rotary_sin ([positions, rotary_dim / 2], any float
    dtype, covering the cache's positions): rotary embedding of q and the new keys on the way in,
    new key i at position cache_seqlens[b] + i, query i there too when causal or windowed, else
    every query at cache_seqlens[b]; rotary_interleaved pairs dims 2i and 2i + 1 (GPT-J,
    FlashAttention's default), False pairs i and i + rotary_dim / 2 (GPT-NeoX, Llama).

    cache_batch_idx (int32 [batch]): sequence b's row of a dense cache, which may then have any
    number of rows. cache_leftpad (int32 [batch]): where sequence b's keys start in its row;
    cache_seqlens counts from the row's start, the padding included (rotary positions too).
    Both for a dense cache only.

    An fp8 cache: k_cache and v_cache of e4m3 codes (uint8 arrays or tensors, or
    torch.float8_e4m3fn) with q fp16 or bf16; k_descale and v_descale (any float dtype, [1],
    [heads_kv] or [batch, heads_kv], FlashAttention-3's shape; each optional, 1) take the stored
    values to the true ones, applied in float32 to the scores and the output. Head dims must be
    multiples of 16; no append (k, v) into it.

    head_dim goes up to 576 here, with v_cache narrower (MLA's absorbed decoding: 576 and 512).
    A v_cache that is k_cache's first columns in the same memory (kv_cache[..., :512] of a CUDA
    tensor) is seen as such and read once with the keys.

    num_splits: split-KV blocks per query block (0 chooses, 1 to 64 forces), merged exactly.
    score_mod, mask_mod and captures as in attention(), b the sequence's index and q_idx, kv_idx
    positions within it (kv_idx counts from the first key after a left pad). Forward only. Returns o like q (and the float32 LSE [batch, heads_q, seqlen_q] with
    return_lse). Bad input raises ValueError naming the argument (the library's names:
    sequences.k_new for k, sequences.page_table for block_table, ...) before anything is
    written."""
    options = _Options(causal, tuple(window), softcap, scale, False, score_mod, mask_mod,
                       _captures_of(captures))
    layout = "[batch, seqlen, heads, head_dim]"
    b, sq, hq, d = _shape("q", q, 4, layout)
    _, rows, hk, _ = _shape("k_cache", k_cache, 4, layout + " or paged")
    if isinstance(cache_seqlens, int):
        cache_seqlens = (torch.full((b,), cache_seqlens, dtype=torch.int32, device=q.device)
                         if is_torch(q) else np.full((b,), cache_seqlens, dtype=np.int32))
    if block_table is not None:
        _shape("block_table", block_table, 2, "[batch, max_pages]")
    seqlen_k = rows if block_table is None else int(block_table.shape[1]) * rows
    a = _call_options(options, b, hq, hk, sq, seqlen_k, d)
    value_dim = int(v_cache.shape[-1])
    a.head_dim_v = value_dim if value_dim != d else 0  # MLA: a narrower value cache
    arrays = {"seqlens_k": "cache_seqlens", "page_table": "block_table", "k_new": "k",
              "v_new": "v", "rotary_cos": "rotary_cos", "rotary_sin": "rotary_sin",
              "cache_batch_idx": "cache_batch_idx", "cache_leftpad": "cache_leftpad",
              "k_descale": "k_descale", "v_descale": "v_descale"}
    with Launch({"q": q, "k_cache": k_cache, "v_cache": v_cache,
                 "cache_seqlens": cache_seqlens, "block_table": block_table, "k": k, "v": v,
                 "cache_batch_idx": cache_batch_idx, "cache_leftpad": cache_leftpad,
                 "rotary_cos": _float32(rotary_cos), "rotary_sin": _float32(rotary_sin),
                 "k_descale": _float32(k_descale), "v_descale": _float32(v_descale),
                 **_capture_inputs(options)}) as launch:
        _bind_captures(a, launch, options)
        sequences = _sequences(launch, num_splits, **{field: name for field, name in arrays.items()
                                                      if launch.inputs[name] is not None})
        sequences.rotary_interleaved = int(bool(rotary_interleaved))
        appends = k is not None or v is not None
        cache = launch.updated if appends else launch.input  # an append writes the cache
        o = launch.output("o", (b, sq, hq, value_dim), _element(q))
        lse = launch.output("lse", (b, hq, sq), "f32")
        _capi.check(_capi.library().flashjit_attention_forward_sequences(
            launch.runtime.handle, ctypes.byref(a), ctypes.byref(sequences),
            _capi.pointer(launch.input("q")), _capi.pointer(cache("k_cache")),
            _capi.pointer(cache("v_cache")), _capi.pointer(o), _capi.pointer(lse), launch.stream))
        launch.write_back()
        o, lse = launch.result("o"), launch.result("lse")
    return (o, lse) if return_lse else o


def _float32(table):
    """A rotary table or descale factors as float32 (the library's dtype for them), or None."""
    if table is None or not (is_torch(table) or isinstance(table, np.ndarray)):
        return table
    return table.float() if is_torch(table) else np.asarray(table, dtype=np.float32)
