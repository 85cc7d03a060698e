"""flashjit_c.h read as the one description of the C API's face: its structs (fields in order,
each with its C type and array length), its functions (result and parameter types) and its
integer constants (enumerators and #defines). _capi builds its ctypes mirror from this, so a
field or function added to the header needs no Python line.

The reader knows the header's own style, not C at large: `typedef struct name { ... } name;`,
`typedef struct name name;` for a handle, one declaration per field, `type name(parameters);`
prototypes, `NAME = value` enumerators and `#define NAME value`. Anything it cannot read
raises, naming the declaration."""

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    name: str
    c_type: str  # "int64_t", "const flashjit_tensor*", ...
    length: "str | None"  # the array length's constant ("FLASHJIT_MAX_RANK"), or None


@dataclass(frozen=True)
class Function:
    result: str
    parameters: "list[str]"  # C types, in order


@dataclass(frozen=True)
class Header:
    structs: "dict[str, list[Field]]"  # in declaration order
    opaque: "set[str]"  # structs declared but not defined (flashjit_runtime): handles
    functions: "dict[str, Function]"
    constants: "dict[str, int]"
    enum_types: "set[str]"  # typedef'd enums, which C passes as int


def header_path() -> str:
    """The header beside the installed package, or the source tree's when the package runs from
    python/ (FLASHJIT_LIBRARY naming a build folder's library)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "flashjit_c.h"),
                 os.path.join(here, "..", "..", "include", "flashjit", "flashjit_c.h")):
        if os.path.isfile(path):
            return os.path.normpath(path)
    raise ImportError(f"flashjit: flashjit_c.h is neither in {here} nor in the source tree; "
                      "reinstall the package")


def _without_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _pointer_spacing(c_type: str) -> str:
    """'const flashjit_tensor *' and 'const flashjit_tensor*' alike as the latter."""
    return re.sub(r"\s*\*", "*", " ".join(c_type.split()))


def _structs(text: str) -> "dict[str, list[Field]]":
    structs = {}
    for name, body in re.findall(r"typedef struct (\w+) \{(.*?)\} \1;", text, flags=re.S):
        fields = []
        for declaration in body.split(";"):
            declaration = " ".join(declaration.split())
            if not declaration:
                continue
            match = re.fullmatch(r"(.+?)\s*\b(\w+)(?:\[(\w+)\])?", declaration)
            if match is None:
                raise ImportError(f"flashjit_c.h: {name}: cannot read the field '{declaration}'")
            fields.append(Field(match.group(2), _pointer_spacing(match.group(1)), match.group(3)))
        structs[name] = fields
    return structs


def _functions(text: str) -> "dict[str, Function]":
    functions = {}
    pattern = r"([\w ]+?\**)\s*\b(flashjit_\w+)\(([^)]*)\);"
    for result, name, parameters in re.findall(pattern, " ".join(text.split())):
        types = []
        for parameter in parameters.split(","):
            parameter = parameter.strip()
            if parameter in ("", "void"):
                continue
            unnamed = re.sub(r"\s*\b\w+$", "", parameter)
            if not unnamed:
                raise ImportError(f"flashjit_c.h: {name}: cannot read the parameter "
                                  f"'{parameter}'")
            types.append(_pointer_spacing(unnamed))
        functions[name] = Function(_pointer_spacing(result), types)
    return functions


def _constants(text: str) -> "dict[str, int]":
    constants = {name: int(value) for name, value in re.findall(r"\b(FLASHJIT_\w+) = (\d+)", text)}
    for name, value in re.findall(r"#define (FLASHJIT_\w+) (\d+)\b", text):
        constants[name] = int(value)
    return constants


def read(path: "str | None" = None) -> Header:
    """The header at `path` (default: header_path()) as a Header."""
    with open(path or header_path()) as f:
        text = _without_comments(f.read())
    enum_types = set(re.findall(r"typedef enum \w*\s*\{.*?\}\s*(\w+);", text, flags=re.S))
    opaque = set(re.findall(r"typedef struct (\w+) \1;", text))
    return Header(_structs(text), opaque, _functions(text), _constants(text), enum_types)
