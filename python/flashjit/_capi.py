"""The C API (flashjit_c.h) through ctypes: the library beside this file, its structs and
function signatures built from the header itself (_c_header), and its status codes turned into
Python exceptions. Nothing here names a struct field or a function: what the header declares,
this module has."""

import ctypes
import logging
import os
import re
import threading
import warnings

from . import _c_header


class FlashjitWarning(UserWarning):
    """A problem flashjit worked around: an unusable or corrupt kernel cache, a tuned config it
    could not use. Filter it like any warning (warnings.filterwarnings)."""


class Error(RuntimeError):
    """A flashjit call failed for a reason other than a bad argument (compiling, the driver,
    the kernel cache, a fault the emulator caught). `status` is the C API's status name."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{message} ({status})")
        self.status = status


HEADER = _c_header.read()

# The header's scalar C types and their ctypes; structs and opaque handles are added below.
_SCALARS = {
    "int": ctypes.c_int, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float,
    "size_t": ctypes.c_size_t, "const char*": ctypes.c_char_p, "void*": ctypes.c_void_p,
    "const void*": ctypes.c_void_p, "void**": ctypes.POINTER(ctypes.c_void_p), "void": None,
    "int*": ctypes.POINTER(ctypes.c_int), "const char**": ctypes.POINTER(ctypes.c_char_p),
}
_STRUCTS = {}


def ctype_of(c_type: str):
    """The ctypes type of a C type of the header: its scalars, its enums (int), its structs and
    pointers to them, and opaque handles (flashjit_runtime*) as addresses."""
    if c_type in _SCALARS:
        return _SCALARS[c_type]
    if c_type in HEADER.enum_types:
        return ctypes.c_int
    base = c_type.removeprefix("const ").rstrip("*")
    pointers = len(c_type) - len(c_type.rstrip("*"))
    if base in HEADER.opaque and pointers > 0:
        mirrored, pointers = ctypes.c_void_p, pointers - 1
    elif base in _STRUCTS:
        mirrored = _STRUCTS[base]
    else:
        raise ImportError(f"flashjit: flashjit_c.h's type '{c_type}' has no ctypes mirror")
    for _ in range(pointers):
        mirrored = ctypes.POINTER(mirrored)
    return mirrored


def _define_struct(name: str, fields) -> type:
    members = []
    for field in fields:
        member = ctype_of(field.c_type)
        if field.length is not None:
            member = member * HEADER.constants[field.length]
        members.append((field.name, member))
    return type(name, (ctypes.Structure,), {"_fields_": members})


# Each struct as a ctypes.Structure named as in C (a struct's fields use only those before it,
# as in C), and each integer constant: _capi.flashjit_tensor, _capi.FLASHJIT_DTYPE_BF16.
for _name, _fields in HEADER.structs.items():
    _STRUCTS[_name] = _define_struct(_name, _fields)
globals().update(_STRUCTS)
globals().update(HEADER.constants)

# Every declared function's result and parameter types.
_SIGNATURES = {name: (ctype_of(f.result), [ctype_of(p) for p in f.parameters])
               for name, f in HEADER.functions.items()}

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
            lib.flashjit_keep_messages(1)  # for deliver_messages, not the C-level stderr
            _library = lib
    return _library


_LOG = logging.getLogger("flashjit")


def deliver_messages() -> None:
    """The library's messages since the last delivery, in order: its warnings through
    warnings.warn (FlashjitWarning), its notices of long work (a kernel compiled for the
    emulator) through the "flashjit" logger at INFO (logging.basicConfig(level=logging.INFO)
    shows them)."""
    lib = library()
    kind, text = ctypes.c_int(), ctypes.c_char_p()
    while lib.flashjit_take_message(ctypes.byref(kind), ctypes.byref(text)):
        message = text.value.decode()
        if kind.value == HEADER.constants["FLASHJIT_MESSAGE_WARNING"]:
            warnings.warn(message, FlashjitWarning, stacklevel=3)
        else:
            _LOG.info(message)


def callers_names(message: str, names: dict) -> str:
    """`message` ("invalid argument 'sequences.seqlens_k.shape': ...") with the argument's
    library name in the caller's words: the longest key of `names` that starts the name (whole,
    or before a '.' or '['), replaced by its value ('cache_seqlens.shape')."""
    match = re.match(r"invalid argument '([^']+)'", message)
    if match is None:
        return message
    argument = match.group(1)
    for library_name in sorted(names, key=len, reverse=True):
        if argument == library_name or argument.startswith((library_name + ".",
                                                            library_name + "[")):
            argument = names[library_name] + argument[len(library_name):]
            break
    return message[:match.start(1)] + argument + message[match.end(1):]


def check(status: int, names=None) -> None:
    """Delivers the call's messages (deliver_messages), then raises for a failed call:
    ValueError for a bad argument (the message names it, in the caller's words where `names`
    maps the library's, e.g. {"sequences.seqlens_k": "cache_seqlens"}; `names` may also be a
    function returning that map, called only on a failure), Error otherwise, each with the
    library's message."""
    deliver_messages()  # what the call said on its way, before its result
    if status == HEADER.constants["FLASHJIT_OK"]:
        return
    lib = library()
    message = lib.flashjit_last_error().decode()
    if status == HEADER.constants["FLASHJIT_ERROR_INVALID_ARGUMENT"]:
        if callable(names):
            names = names()
        raise ValueError(callers_names(message, names or {}))
    raise Error(lib.flashjit_status_name(status).decode(), message)


def pointer(tensor):
    """A tensor's (a struct's) address as a call's argument, or None (NULL) for none: a light
    reference (ctypes.byref), which only a function's argument takes."""
    return None if tensor is None else ctypes.byref(tensor)


def field_pointer(tensor):
    """A tensor's (a struct's) address as a struct's field, or None (NULL) for none."""
    return None if tensor is None else ctypes.pointer(tensor)
