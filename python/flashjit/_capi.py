"""The C API (flashjit_c.h) through ctypes: the library beside this file, its structs, and its
status codes turned into Python exceptions."""

import ctypes
import os
import threading

MAX_RANK = 4

DTYPE_F16, DTYPE_BF16, DTYPE_F32, DTYPE_I32, DTYPE_E4M3 = 0, 1, 2, 3, 4
BACKEND_CUDA, BACKEND_EMULATOR = 0, 1
STATUS_OK, STATUS_INVALID_ARGUMENT = 0, 1
MULTISCALE_DECAY, MULTISCALE_TENSOR = 0, 1


class Error(RuntimeError):
    """A flashjit call failed for a reason other than a bad argument (compiling, the driver,
    the kernel cache, a fault the emulator caught). `status` is the C API's status name."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{message} ({status})")
        self.status = status


class Tensor(ctypes.Structure):
    """flashjit_tensor: a strided view, strides in elements."""

    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_RANK), ("strides", ctypes.c_int64 * MAX_RANK)]


class RuntimeOptions(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("backend", ctypes.c_int), ("tuning", ctypes.c_int),
                ("emulated_arch", ctypes.c_char_p), ("check_indices", ctypes.c_int)]


class AttentionOptions(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64),
                ("heads_kv", ctypes.c_int64), ("seqlen_q", ctypes.c_int64),
                ("seqlen_k", ctypes.c_int64), ("head_dim", ctypes.c_int64), ("causal", ctypes.c_int),
                ("window_left", ctypes.c_int64), ("window_right", ctypes.c_int64),
                ("scale", ctypes.c_float), ("softcap", ctypes.c_float),
                ("deterministic", ctypes.c_int), ("score_mod", ctypes.c_char_p),
                ("mask_mod", ctypes.c_char_p), ("block_mask", ctypes.POINTER(Tensor)),
                ("captures", ctypes.c_void_p), ("num_captures", ctypes.c_int),
                ("head_dim_v", ctypes.c_int64)]


class Capture(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("tensor", Tensor), ("grad", ctypes.POINTER(Tensor))]


class Sequences(ctypes.Structure):
    _fields_ = [("cu_seqlens_q", ctypes.POINTER(Tensor)), ("cu_seqlens_k", ctypes.POINTER(Tensor)),
                ("seqlens_k", ctypes.POINTER(Tensor)), ("page_table", ctypes.POINTER(Tensor)),
                ("splits", ctypes.c_int), ("k_new", ctypes.POINTER(Tensor)),
                ("v_new", ctypes.POINTER(Tensor)), ("rotary_cos", ctypes.POINTER(Tensor)),
                ("rotary_sin", ctypes.POINTER(Tensor)), ("rotary_interleaved", ctypes.c_int),
                ("cache_batch_idx", ctypes.POINTER(Tensor)),
                ("cache_leftpad", ctypes.POINTER(Tensor)),
                ("k_descale", ctypes.POINTER(Tensor)), ("v_descale", ctypes.POINTER(Tensor)),
                ("seqused_q", ctypes.POINTER(Tensor))]


class LayerNormOptions(ctypes.Structure):
    _fields_ = [("epsilon", ctypes.c_float), ("rms", ctypes.c_int),
                ("bias", ctypes.POINTER(Tensor)), ("residual", ctypes.POINTER(Tensor)),
                ("sum", ctypes.POINTER(Tensor))]


class MultiScaleOptions(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64),
                ("heads_kv", ctypes.c_int64), ("seqlen_q", ctypes.c_int64),
                ("seqlen_k", ctypes.c_int64), ("head_dim", ctypes.c_int64),
                ("scale", ctypes.c_float), ("mask", ctypes.c_int)]


_T = ctypes.POINTER(Tensor)
_P = ctypes.c_void_p
_SIGNATURES = {
    "flashjit_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "flashjit_last_error": (ctypes.c_char_p, []),
    "flashjit_version": (ctypes.c_char_p, []),
    "flashjit_runtime_options_init": (None, [ctypes.POINTER(RuntimeOptions)]),
    "flashjit_runtime_create": (ctypes.c_int, [ctypes.POINTER(RuntimeOptions),
                                               ctypes.POINTER(_P)]),
    "flashjit_runtime_destroy": (None, [_P]),
    "flashjit_allocate": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(_P)]),
    "flashjit_free": (ctypes.c_int, [_P, _P]),
    "flashjit_copy_to_device": (ctypes.c_int, [_P, _P, _P, ctypes.c_size_t]),
    "flashjit_copy_to_host": (ctypes.c_int, [_P, _P, _P, ctypes.c_size_t]),
    "flashjit_attention_init": (None, [ctypes.POINTER(AttentionOptions)]),
    "flashjit_attention_forward": (ctypes.c_int, [_P, ctypes.POINTER(AttentionOptions)] +
                                   [_T] * 5 + [_P]),
    "flashjit_attention_backward": (ctypes.c_int, [_P, ctypes.POINTER(AttentionOptions)] +
                                    [_T] * 9 + [_P]),
    "flashjit_build_block_mask": (ctypes.c_int, [_P, ctypes.POINTER(AttentionOptions), _T, _P]),
    "flashjit_sequences_init": (None, [ctypes.POINTER(Sequences)]),
    "flashjit_attention_forward_sequences": (ctypes.c_int,
                                             [_P, ctypes.POINTER(AttentionOptions),
                                              ctypes.POINTER(Sequences)] + [_T] * 5 + [_P]),
    "flashjit_attention_backward_sequences": (ctypes.c_int,
                                              [_P, ctypes.POINTER(AttentionOptions),
                                               ctypes.POINTER(Sequences)] + [_T] * 9 + [_P]),
    "flashjit_merge_states": (ctypes.c_int, [_P] + [_T] * 4 + [_P]),
    "flashjit_layer_norm_init": (None, [ctypes.POINTER(LayerNormOptions)]),
    "flashjit_layer_norm_forward": (ctypes.c_int, [_P, ctypes.POINTER(LayerNormOptions)] +
                                    [_T] * 6 + [_P]),
    "flashjit_layer_norm_backward": (ctypes.c_int, [_P, ctypes.POINTER(LayerNormOptions)] +
                                     [_T] * 9 + [_P]),
    "flashjit_multiscale_attention_init": (None, [ctypes.POINTER(MultiScaleOptions)]),
    "flashjit_multiscale_forward": (ctypes.c_int, [_P, ctypes.POINTER(MultiScaleOptions)] +
                                    [_T] * 6 + [_P]),
    "flashjit_multiscale_backward": (ctypes.c_int, [_P, ctypes.POINTER(MultiScaleOptions)] +
                                     [_T] * 11 + [_P]),
}

_library = None
_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """libflashjit.so, loaded once with its signatures declared: the one installed beside this
    file, or the one FLASHJIT_LIBRARY names (a build folder's api/libflashjit.so, for running
    the package from a source tree)."""
    global _library
    with _lock:
        if _library is None:
            path = os.environ.get("FLASHJIT_LIBRARY") or os.path.join(
                os.path.dirname(os.path.abspath(__file__)), "libflashjit.so")
            if os.environ.get("FLASHJIT_LIBRARY") and not os.path.isfile(path):
                raise ImportError(f"flashjit: FLASHJIT_LIBRARY names {path}, which is not a file")
            if not os.path.isfile(path):
                raise ImportError(f"flashjit: {path} is missing; install the package with "
                                  "`python3 -m pip install --no-build-isolation ./python`, which "
                                  "builds it")
            lib = ctypes.CDLL(path)
            for name, (result, arguments) in _SIGNATURES.items():
                function = getattr(lib, name)
                function.restype = result
                function.argtypes = arguments
            _library = lib
    return _library


def check(status: int) -> None:
    """Raises for a failed call: ValueError for a bad argument (the message names it), Error
    otherwise, each with the library's message."""
    if status == STATUS_OK:
        return
    lib = library()
    message = lib.flashjit_last_error().decode()
    if status == STATUS_INVALID_ARGUMENT:
        raise ValueError(message)
    raise Error(lib.flashjit_status_name(status).decode(), message)


def pointer(tensor) -> "ctypes.POINTER(Tensor) | None":
    """A Tensor's address for a call, or None (NULL) for none."""
    return None if tensor is None else ctypes.pointer(tensor)
