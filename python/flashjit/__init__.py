"""flashjit for Python: FlashAttention-class attention kernels compiled at run time, called
with numpy arrays (on the CPU emulator) or torch tensors (on the GPU, or the emulator for
tensors in host memory), with FlashAttention's call names and shapes.

The library (libflashjit.so) is inside the package; its kernel cache is shared with the C++
API's (FLASHJIT_CACHE_DIR, else ~/.cache/flashjit). FLASHJIT_EMULATED_ARCH ("sm_80", the
default, or "sm_90a") chooses the GPU the emulator models."""

from ._capi import Error, FlashjitWarning
from .attention import attention, attention_backward, build_block_mask
from .kvcache import attention_with_kvcache
from .merge import merge_states
from .multiscale import multiscale_attention
from .norms import layer_norm, rms_norm
from .packed import (attention_kvpacked, attention_qkvpacked, attention_varlen_kvpacked,
                     attention_varlen_qkvpacked)
from .sdpa import scaled_dot_product_attention
from ._trace import trace_modifiers
from .varlen import attention_varlen
from .warm import warm

__all__ = ["Error", "FlashjitWarning", "attention", "attention_backward", "attention_kvpacked",
           "attention_qkvpacked", "attention_varlen", "attention_varlen_kvpacked",
           "attention_varlen_qkvpacked", "attention_with_kvcache", "build_block_mask",
           "layer_norm", "merge_states", "multiscale_attention", "rms_norm",
           "scaled_dot_product_attention", "trace_modifiers", "version", "warm"]


def version() -> str:
    """The library's version, "major.minor.patch"."""
    from . import _capi
    return _capi.library().flashjit_version().decode()
