"""The package's ctypes face of the C API (flashjit/_capi.py), which it builds from the C header
itself (include/flashjit/flashjit_c.h, the one description of the C API's face), against what a C
compiler makes of that header: every struct's size and every field's offset and size, every
constant's value, and every declared function exported by the library with as many parameters
as ctypes passes. A field the reader misread would shift every later field silently at run time;
here it fails by name."""

import ctypes
import os
import pathlib
import shutil
import subprocess

import pytest

from flashjit import _c_header, _capi

INCLUDE = pathlib.Path(_c_header.header_path()).parent


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory) -> dict:
    """{name: value} printed by a C program compiled against the header: "sizeof <struct>",
    "offsetof <struct>.<field>", "sizeof <struct>.<field>" and each constant. Compiled once for
    the tests that read it."""
    tmp_path = tmp_path_factory.mktemp("c_layout")
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        pytest.skip("no C compiler (cc) to compare the header's layout with")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "flashjit_c.h"',
             "int main(void) {"]
    for struct, fields in _capi.HEADER.structs.items():
        lines.append(f'  printf("sizeof {struct} %zu\\n", sizeof({struct}));')
        for field in fields:
            lines.append(f'  printf("offsetof {struct}.{field.name} %zu\\n", '
                         f"offsetof({struct}, {field.name}));")
            lines.append(f'  printf("sizeof {struct}.{field.name} %zu\\n", '
                         f"sizeof((({struct}*)0)->{field.name}));")
    for name in _capi.HEADER.constants:
        lines.append(f'  printf("{name} %lld\\n", (long long)({name}));')
    lines += ["  return 0;", "}"]
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines) + "\n")
    program = tmp_path / "layout"
    # If the header includes another of flashjit's, `include` holds it too (the source tree's
    # include/flashjit, or the installed package's folder).
    subprocess.run([compiler, "-std=c99", "-Wall", "-Werror", f"-I{INCLUDE}", str(source), "-o",
                    str(program)], check=True)
    output = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    return {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in output.splitlines()}


def test_the_header_is_read_whole():
    header = _capi.HEADER
    assert {"flashjit_tensor", "flashjit_attention", "flashjit_sequences",
            "flashjit_layer_norm"} <= set(header.structs)
    assert len(header.functions) >= 25, "the header's functions were not found"
    assert header.opaque == {"flashjit_runtime"}
    assert "flashjit_status" in header.enum_types
    assert header.constants["FLASHJIT_OK"] == 0
    for name, struct in _capi._STRUCTS.items():
        assert [f[0] for f in struct._fields_] == [f.name for f in header.structs[name]]


def test_every_struct_has_the_c_compilers_layout(c_layout):
    for name, struct in _capi._STRUCTS.items():
        assert ctypes.sizeof(struct) == c_layout[f"sizeof {name}"], f"sizeof {name}"
        for field, _ in struct._fields_:
            member = getattr(struct, field)
            assert member.offset == c_layout[f"offsetof {name}.{field}"], f"{name}.{field}'s offset"
            assert member.size == c_layout[f"sizeof {name}.{field}"], f"{name}.{field}'s size"


def test_every_constant_has_the_c_compilers_value(c_layout):
    for name, value in _capi.HEADER.constants.items():
        assert getattr(_capi, name) == value == c_layout[name], name


def test_every_declared_function_is_exported_with_its_parameters():
    library = _capi.library()
    for name, function in _capi.HEADER.functions.items():
        assert hasattr(library, name), f"{name} is declared but libflashjit.so does not export it"
        result, arguments = _capi._SIGNATURES[name]
        assert len(arguments) == len(function.parameters), f"{name}'s parameter count"
        assert getattr(library, name).argtypes == arguments, name
        assert (result is None) == (function.result == "void"), f"{name}'s result"


def test_a_field_the_reader_cannot_read_is_refused_by_name(tmp_path):
    header = tmp_path / "flashjit_c.h"
    header.write_text("typedef struct flashjit_bad { int (*callback)(void); } flashjit_bad;\n")
    with pytest.raises(ImportError, match="flashjit_bad"):
        _c_header.read(str(header))


def test_a_packed_tensor_view_reads_back_field_by_field():
    # The package packs flashjit_tensor's bytes at once (_arrays.Launch._view) rather than
    # setting its fields: read through the struct's own fields, every value is where C finds it.
    from flashjit import _arrays
    launch = _arrays.Launch.__new__(_arrays.Launch)
    launch._keep = []
    for shape, strides in (((3,), (1,)), ((2, 5, 7, 64), (4480, 896, 128, 1)),
                           ((1, 1), (-8, 2 ** 40))):
        view = launch._view("bf16", shape, strides, 0x7F00_1234_5678)
        rank = len(shape)
        assert (view.data, view.dtype, view.rank) == (0x7F00_1234_5678,
                                                      _capi.FLASHJIT_DTYPE_BF16, rank)
        assert tuple(view.shape[:rank]) == shape and tuple(view.strides[:rank]) == strides
        assert not any(view.shape[rank:]) and not any(view.strides[rank:])
    with pytest.raises(ValueError, match="rank 5 is above 4"):
        launch._view("f32", (1,) * 5, (1,) * 5, 0)
