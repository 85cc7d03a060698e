"""The package's ctypes mirror of the C API (flashjit/_capi.py) against the C header it mirrors
(include/flashjit/flashjit_c.h, the one description of the C API's face): every struct field by
name, order and type, every mirrored function's result and parameters, every declared function
exported by the library, and the constants. A field added to a C struct and not to its mirror
shifts every later field silently at run time; here it fails by name."""

import ctypes
import pathlib
import re

import pytest

from flashjit import _capi

HEADER = pathlib.Path(__file__).resolve().parents[2] / "include" / "flashjit" / "flashjit_c.h"

# Each C struct and the _capi class that mirrors it.
STRUCTS = {
    "flashjit_tensor": _capi.Tensor,
    "flashjit_runtime_options": _capi.RuntimeOptions,
    "flashjit_attention": _capi.AttentionOptions,
    "flashjit_capture": _capi.Capture,
    "flashjit_sequences": _capi.Sequences,
    "flashjit_layer_norm": _capi.LayerNormOptions,
    "flashjit_multiscale_attention": _capi.MultiScaleOptions,
}

# The C functions the package does not call, and why; a new C function is either mirrored in
# _capi._SIGNATURES or named here.
NOT_MIRRORED = {
    "flashjit_synchronize": "torch's streams order the calls; numpy calls run on the emulator",
    "flashjit_merge_state_in_place": "merge_states covers the package's merges",
}


def header_text() -> str:
    if not HEADER.is_file():
        pytest.skip(f"{HEADER} is not here (the package runs outside its source tree)")
    text = HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def c_structs(text: str) -> dict:
    """{struct name: [(field, C type, array length or None)]}."""
    structs = {}
    for name, body in re.findall(r"typedef struct (\w+) \{(.*?)\} \1;", text, flags=re.S):
        fields = []
        for declaration in body.split(";"):
            declaration = " ".join(declaration.split())
            if not declaration:
                continue
            match = re.fullmatch(r"(.+?)\s*(\w+)(?:\[(\w+)\])?", declaration)
            assert match, f"{name}: cannot read the field '{declaration}'"
            fields.append((match.group(2), match.group(1).replace(" *", "*"), match.group(3)))
        structs[name] = fields
    return structs


def c_functions(text: str) -> dict:
    """{function name: (C result type, [C parameter types])}."""
    functions = {}
    pattern = r"([\w ]+?\**)\s*\b(flashjit_\w+)\(([^)]*)\);"
    for result, name, parameters in re.findall(pattern, " ".join(text.split())):
        types = []
        for parameter in parameters.split(","):
            parameter = parameter.strip()
            if parameter in ("", "void"):
                continue
            types.append(re.sub(r"\s*\b\w+$", "", parameter).replace(" *", "*").strip())
        functions[name] = (result.strip().replace(" *", "*"), types)
    return functions


# A C type and the ctypes type its mirror must use.
SCALARS = {
    "int": ctypes.c_int, "int64_t": ctypes.c_int64, "float": ctypes.c_float,
    "size_t": ctypes.c_size_t, "const char*": ctypes.c_char_p, "void*": ctypes.c_void_p,
    "const void*": ctypes.c_void_p, "flashjit_status": ctypes.c_int,
    "flashjit_runtime*": ctypes.c_void_p, "flashjit_runtime**": ctypes.POINTER(ctypes.c_void_p),
    "void**": ctypes.POINTER(ctypes.c_void_p), "void": None,
}


def enum_types() -> set:
    """The header's enum typedefs, which C passes as int."""
    return set(re.findall(r"typedef enum \w*\s*\{.*?\}\s*(\w+);", header_text(), flags=re.S))


def mirror_of(c_type: str):
    """The ctypes type that mirrors `c_type`."""
    if c_type in SCALARS:
        return SCALARS[c_type]
    if c_type in enum_types():
        return ctypes.c_int
    base = c_type.removeprefix("const ").rstrip("*")
    pointers = len(c_type) - len(c_type.rstrip("*"))
    assert base in STRUCTS, f"no mirror is known for the C type '{c_type}'"
    mirrored = STRUCTS[base]
    for _ in range(pointers):
        mirrored = ctypes.POINTER(mirrored)
    return mirrored


def same_type(python_type, c_type: str) -> bool:
    expected = mirror_of(c_type)
    # A pointer to a struct the package never reads may be passed as an address.
    if python_type is ctypes.c_void_p and c_type.endswith("*"):
        return True
    return python_type is expected


def test_every_struct_field_is_mirrored_in_order_with_its_type():
    structs = c_structs(header_text())
    assert set(STRUCTS) == set(structs), "a C struct without a mirror, or a mirror without one"
    for name, fields in structs.items():
        mirror = STRUCTS[name]._fields_
        assert [f[0] for f in fields] == [m[0] for m in mirror], f"{name}'s fields"
        for (field, c_type, length), (_, python_type) in zip(fields, mirror):
            if length is not None:
                assert python_type._length_ == getattr(_capi, length.removeprefix("FLASHJIT_")), \
                    f"{name}.{field}'s length"
                python_type = python_type._type_
            assert same_type(python_type, c_type), f"{name}.{field}: {c_type} vs {python_type}"


def test_every_mirrored_function_matches_its_declaration():
    functions = c_functions(header_text())
    for name, (result, parameters) in _capi._SIGNATURES.items():
        assert name in functions, f"{name} is mirrored but not declared in flashjit_c.h"
        c_result, c_parameters = functions[name]
        assert same_type(result, c_result) if c_result != "void" else result is None, \
            f"{name}'s result: {c_result} vs {result}"
        assert len(parameters) == len(c_parameters), f"{name}'s parameter count"
        for index, (python_type, c_type) in enumerate(zip(parameters, c_parameters)):
            assert same_type(python_type, c_type), f"{name}'s parameter {index}: {c_type}"


def test_every_declared_function_is_mirrored_or_named_and_exported():
    functions = c_functions(header_text())
    assert len(functions) >= 25, "the header's functions were not found"
    unmirrored = set(functions) - set(_capi._SIGNATURES)
    assert unmirrored == set(NOT_MIRRORED), "mirror each new C function or say why not"
    library = _capi.library()
    for name in functions:
        assert hasattr(library, name), f"{name} is declared but libflashjit.so does not export it"


def test_constants_match_the_header():
    text = header_text()
    declared = {name: int(value) for name, value in re.findall(r"\b(FLASHJIT_\w+) = (\d+)", text)}
    assert int(re.search(r"#define FLASHJIT_MAX_RANK (\d+)", text).group(1)) == _capi.MAX_RANK
    names = {"STATUS_OK": "FLASHJIT_OK",
             "STATUS_INVALID_ARGUMENT": "FLASHJIT_ERROR_INVALID_ARGUMENT"}
    for name in ("DTYPE_F16", "DTYPE_BF16", "DTYPE_F32", "DTYPE_I32", "DTYPE_E4M3",
                 "BACKEND_CUDA", "BACKEND_EMULATOR", "MULTISCALE_DECAY", "MULTISCALE_TENSOR",
                 "STATUS_OK", "STATUS_INVALID_ARGUMENT"):
        assert declared[names.get(name, "FLASHJIT_" + name)] == getattr(_capi, name), name
