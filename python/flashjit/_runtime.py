"""The runtimes a process shares: one CPU emulator for arrays in host memory, one runtime per
CUDA device for torch tensors on a GPU. Created on first use, kept for the process's life (the
kernels they load and compile are cached with them and on disk)."""

import ctypes
import os
import threading

from . import _capi

_lock = threading.Lock()
_emulator = None
_cuda = {}


class Runtime:
    """One flashjit_runtime: `emulated` for the CPU emulator, else CUDA device `device`."""

    def __init__(self, emulated: bool, device: int = 0):
        lib = _capi.library()
        options = _capi.flashjit_runtime_options()
        lib.flashjit_runtime_options_init(ctypes.byref(options))
        options.device = device
        if emulated:
            options.backend = _capi.FLASHJIT_BACKEND_EMULATOR
            arch = os.environ.get("FLASHJIT_EMULATED_ARCH")
            options.emulated_arch = arch.encode() if arch else None
        handle = ctypes.c_void_p()
        _capi.check(lib.flashjit_runtime_create(ctypes.byref(options), ctypes.byref(handle)))
        self.handle = handle
        self.emulated = emulated
        self.device = device

    def allocate(self, nbytes: int) -> int:
        out = ctypes.c_void_p()
        _capi.check(_capi.library().flashjit_allocate(self.handle, max(nbytes, 1),
                                                       ctypes.byref(out)))
        return out.value

    def free(self, address: int) -> None:
        _capi.library().flashjit_free(self.handle, address)

    def copy_in(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            _capi.check(_capi.library().flashjit_copy_to_device(self.handle, dst, src, nbytes))

    def copy_out(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            _capi.check(_capi.library().flashjit_copy_to_host(self.handle, dst, src, nbytes))


def emulator() -> Runtime:
    """The process's emulator runtime (the GPU it models: FLASHJIT_EMULATED_ARCH, default
    sm_80, read when it is first created)."""
    global _emulator
    with _lock:
        if _emulator is None:
            _emulator = Runtime(emulated=True)
        return _emulator


def cuda(device: int) -> Runtime:
    """The process's runtime on CUDA device `device`."""
    with _lock:
        if device not in _cuda:
            _cuda[device] = Runtime(emulated=False, device=device)
        return _cuda[device]
