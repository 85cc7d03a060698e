"""numpy arrays and torch tensors as the C API's tensor views, for one call.

A call gathers its arrays (Launch): all numpy, or all torch on one device. Arrays in host
memory run on the emulator: inputs are copied into the emulator's memory and outputs copied
back into new arrays (and inputs the call updates, a KV cache, back into themselves). torch
tensors on a GPU are passed as they are (strides included) and the call runs on the current
stream. Whatever the call allocated is freed when it ends, whether it succeeds or raises."""

import ctypes
import struct

import numpy as np

from . import _capi, _runtime

try:  # torch is optional: numpy users need not have it
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None

# uint8 carries an fp8 KV cache's e4m3 codes (numpy has no fp8; torch before 2.1 neither).
_NUMPY_DTYPES = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
                 np.dtype(np.int32): "i32", np.dtype(np.uint8): "e4m3"}
_NUMPY_BY_NAME = {v: k for k, v in _NUMPY_DTYPES.items()}
DTYPE_CODES = {"f16": _capi.FLASHJIT_DTYPE_F16, "bf16": _capi.FLASHJIT_DTYPE_BF16,
          "f32": _capi.FLASHJIT_DTYPE_F32, "i32": _capi.FLASHJIT_DTYPE_I32,
          "e4m3": _capi.FLASHJIT_DTYPE_E4M3}
_ITEMSIZE = {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "e4m3": 1}

# flashjit_tensor's bytes (data, dtype, rank, shape, strides) in the C compiler's layout.
_MAX_RANK = _capi.FLASHJIT_MAX_RANK
_TENSOR_LAYOUT = struct.Struct(f"@Pii{_MAX_RANK}q{_MAX_RANK}q")
_ZEROS = (0,) * _MAX_RANK
if _TENSOR_LAYOUT.size != ctypes.sizeof(_capi.flashjit_tensor):  # pragma: no cover
    raise ImportError("flashjit: flashjit_tensor's fields are not (data, dtype, rank, shape, "
                      "strides) as _arrays packs them")


class _NoTorch:  # what is_torch() tests against where torch is absent: nothing is one
    pass


# torch dtype -> name, and name -> torch dtype ("e4m3": float8_e4m3fn where torch has it).
_TORCH_DTYPES = {}
if torch is not None:
    _TORCH_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
                     torch.int32: "i32", torch.uint8: "e4m3"}
    if hasattr(torch, "float8_e4m3fn"):  # torch 2.1 and later
        _TORCH_DTYPES[torch.float8_e4m3fn] = "e4m3"
_TORCH_BY_NAME = {v: k for k, v in _TORCH_DTYPES.items()}  # e4m3: the fp8 dtype if any
_TENSOR = torch.Tensor if torch is not None else _NoTorch


def is_torch(x) -> bool:
    return isinstance(x, _TENSOR)


def dtype_name(name: str, x) -> str:
    """x's dtype as "f16", "bf16", "f32", "i32" or "e4m3" (an fp8 cache's codes: uint8, or
    torch.float8_e4m3fn); a ValueError naming `name` otherwise."""
    if isinstance(x, _TENSOR):
        found = _TORCH_DTYPES.get(x.dtype)
        if found is not None:  # every call asks for each of its arrays: the short way first
            return found
        accepted = ("torch.float16, torch.bfloat16, torch.float32, torch.int32 or, for an fp8 "
                    "cache, torch.uint8 / torch.float8_e4m3fn")
    elif isinstance(x, np.ndarray):
        found = _NUMPY_DTYPES.get(x.dtype)
        if found is not None:
            return found
        accepted = ("float16, float32, int32 or, for an fp8 cache's e4m3 codes, uint8 (numpy "
                    "has no bfloat16: use torch for it)")
    else:
        raise TypeError(f"'{name}' must be a numpy array or a torch tensor, not "
                        f"{type(x).__name__}")
    integer = (not x.dtype.is_floating_point and not x.dtype.is_complex
               and x.dtype != torch.bool) if is_torch(x) else x.dtype.kind in "iu"
    if integer:  # an index array (cu_seqlens, cache_seqlens, block_table, ...) of int64
        convert = ".to(torch.int32)" if is_torch(x) else ".astype(numpy.int32)"
        raise ValueError(f"'{name}' has dtype {x.dtype}: index arrays must be int32 "
                         f"(convert with {convert})")
    raise ValueError(f"'{name}' has dtype {x.dtype}; accepted: {accepted}")


def device_of(x) -> str:
    """"cpu" for numpy arrays and torch tensors in host memory, else "cuda:N"."""
    if is_torch(x) and x.device.type == "cuda":
        return f"cuda:{x.device.index if x.device.index is not None else 0}"
    if is_torch(x) and x.device.type != "cpu":
        raise ValueError(f"tensors on {x.device} are not supported: host memory or CUDA only")
    return "cpu"


class Launch:
    """The arrays of one call. `inputs` maps argument names to arrays (None: absent); they must
    all be numpy or all torch, and on one device, else a ValueError names the first that
    differs from the first array. Use as a context manager, so that its memory is freed."""

    def __init__(self, inputs: dict):
        present = [(name, x) for name, x in inputs.items() if x is not None]
        first_name, first = present[0]
        self.torch = is_torch(first)
        self.device = device_of(first)
        # Where torch allocates outputs: the first tensor's device object (no string to parse).
        self._torch_device = first.device if self.torch else None
        self._dtypes = {}  # input name -> dtype name, checked once here
        for name, x in present:
            self._dtypes[name] = dtype_name(name, x)
            if is_torch(x) != self.torch:
                raise ValueError(f"'{name}' is a {'torch tensor' if is_torch(x) else 'numpy array'}"
                                 f" but '{first_name}' is not: pass all numpy or all torch")
            if self.torch and x.device == self._torch_device:
                continue  # the first's device, which device_of took: nothing to name
            device = device_of(x)
            if device != self.device:
                raise ValueError(f"'{name}' is on {device} but '{first_name}' is on "
                                 f"{self.device}: every array of a call must be on one device")
        self.inputs = inputs
        self._index = -1 if self.device == "cpu" else int(self.device.split(":")[1])
        self.runtime = _runtime.emulator() if self._index < 0 else _runtime.cuda(self._index)
        self._owned = []  # emulator addresses to free
        self._outputs = {}  # name -> (array, address or None)
        self._updated = []  # (array, emulator address, bytes): inputs the call writes in place
        self._keep = []  # views kept alive for the call

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for address in self._owned:
            self.runtime.free(address)
        self._owned.clear()
        return False

    @property
    def stream(self):
        """The CUstream to run on: torch's current stream on a GPU, NULL on the emulator."""
        if self._index < 0:
            return None
        return ctypes.c_void_p(_current_stream(self._index))

    def _view(self, dtype: str, shape, strides, address) -> _capi.flashjit_tensor:
        rank = len(shape)
        if rank > _MAX_RANK:
            raise ValueError(f"rank {rank} is above {_MAX_RANK}")
        # Packed as bytes and copied in at once: a third of the time of setting the fields.
        pad = _ZEROS[rank:]
        t = _capi.flashjit_tensor.from_buffer_copy(_TENSOR_LAYOUT.pack(
            address or 0, DTYPE_CODES[dtype], rank, *shape, *pad, *strides, *pad))
        self._keep.append(t)
        return t

    def input(self, name: str):
        """The view of input `name`, or None when absent. Host arrays are copied into the
        emulator's memory (contiguous); GPU tensors are passed as they are."""
        x = self.inputs[name]
        if x is None:
            return None
        dtype = self._dtypes[name]
        if self.device != "cpu":
            return self._view(dtype, tuple(x.shape), tuple(x.stride()), x.data_ptr())
        if self.torch:
            host = x.detach().contiguous()
            source, nbytes = host.data_ptr(), host.numel() * host.element_size()
        else:
            host = np.ascontiguousarray(x)
            source, nbytes = host.ctypes.data, host.nbytes
        address = self.runtime.allocate(nbytes)
        self._owned.append(address)
        self.runtime.copy_in(address, source, nbytes)
        return self._view(dtype, tuple(host.shape), _contiguous_strides(host.shape), address)

    def updated(self, name: str):
        """The view of input `name`, which the call also writes (a KV cache it appends to): as
        input(), and on the emulator copied back into the array by write_back()."""
        view = self.input(name)
        if self.device == "cpu" and view is not None:
            x = self.inputs[name]
            nbytes = (x.numel() * x.element_size()) if self.torch else x.nbytes
            self._updated.append((x, view.data, nbytes))
        return view

    def write_back(self):
        """Copies what the call wrote into the updated() inputs back into their arrays (the
        emulator's copies; a GPU wrote them in place). Call it only after the call succeeded."""
        for x, address, nbytes in self._updated:
            if self.torch:
                target = (x.detach() if x.is_contiguous() else
                          torch.empty_like(x.detach(), memory_format=torch.contiguous_format))
                self.runtime.copy_out(target.data_ptr(), address, nbytes)
                if target.data_ptr() != x.data_ptr():
                    x.detach().copy_(target)
            else:
                target = x if x.flags.c_contiguous else np.empty(x.shape, dtype=x.dtype)
                self.runtime.copy_out(target.ctypes.data, address, nbytes)
                if target is not x:
                    np.copyto(x, target)

    def output(self, name: str, shape, dtype: str):
        """A new output array `name` of `shape` and `dtype` ("f16", "bf16", "f32", "i32"), and
        its view; result(name) gives the array once the call has run. numpy has no bfloat16:
        a bf16 output of numpy inputs (the fp8 forward's o) comes back as float32, exactly."""
        shape = tuple(map(int, shape))
        if self.torch:
            array = torch.empty(shape, dtype=_TORCH_BY_NAME[dtype], device=self._torch_device)
        else:
            # bf16: its bits, widened after
            numpy_dtype = np.uint16 if dtype == "bf16" else _NUMPY_BY_NAME[dtype]
            array = np.empty(shape, dtype=numpy_dtype)
        if self.device != "cpu":
            self._outputs[name] = (array, None)
            return self._view(dtype, shape, tuple(array.stride()), array.data_ptr())
        nbytes = int(np.prod(shape, dtype=np.int64)) * _ITEMSIZE[dtype]
        address = self.runtime.allocate(nbytes)
        self._owned.append(address)
        self._outputs[name] = (array, address, nbytes)
        return self._view(dtype, shape, _contiguous_strides(shape), address)

    def result(self, name: str):
        """Output `name` after the call: copied back from the emulator's memory when on it."""
        entry = self._outputs[name]
        array = entry[0]
        if self.device == "cpu":
            address, nbytes = entry[1], entry[2]
            target = array.data_ptr() if self.torch else array.ctypes.data
            self.runtime.copy_out(target, address, nbytes)
        if not self.torch and array.dtype == np.uint16:  # bf16 bits: the upper half of a float32
            return (array.astype(np.uint32) << 16).view(np.float32)
        return array


# The call PyTorch's own generated code makes for the current stream's address, where this torch
# has it (its CUDA builds): it builds no Stream object as torch.cuda.current_stream() does.
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None) if torch is not None else None


def _current_stream(index: int) -> int:
    """The address of torch's current CUDA stream on device `index`."""
    if _RAW_STREAM is not None:
        return _RAW_STREAM(index)
    return torch.cuda.current_stream(index).cuda_stream


def _contiguous_strides(shape):
    strides, step = [], 1
    for extent in reversed(tuple(shape)):
        strides.append(step)
        step *= int(extent)
    return tuple(reversed(strides))
