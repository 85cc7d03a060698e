"""The package's ctypes signatures against include/flashjit/flashjit_c.h: every function it
declares is in the header with as many parameters (a missing one would be passed by ctypes's
default conversions, which happen to work for pointers on x86-64, and hide the mistake)."""

import os
import re

from flashjit import _capi

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "include", "flashjit",
                      "flashjit_c.h")


def test_every_declared_function_has_the_headers_parameter_count():
    with open(HEADER) as f:
        header = f.read()
    for name, (_, arguments) in _capi._SIGNATURES.items():
        found = re.search(r"\b" + name + r"\s*\(([^;]*?)\)\s*;", header, re.S)
        assert found, f"{name} is not declared in flashjit_c.h"
        parameters = [p for p in found.group(1).split(",") if p.strip() not in ("", "void")]
        assert len(parameters) == len(arguments), name
