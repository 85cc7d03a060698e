#!/usr/bin/env python3
"""Fails when a function of the library, its tools or its Python package is longer than LIMIT
lines (tests, examples and benchmarks aside): a function that long no longer reads as one step
of the algorithm. C and C++ functions are found by their braces (a body opened at namespace or
class scope after a parameter list), Python functions by the ast, docstrings counted.

Usage: tools/function_lengths.py [REPOSITORY_ROOT]; prints each offender as path:line."""

import ast
import pathlib
import re
import subprocess
import sys

LIMIT = 80
SKIPPED = ("tests/", "examples/", "bench/", "python/tests/")


def c_functions(text: str):
    """(first line, line count, signature tail) of each function body in C or C++ `text`."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    stack, before = [], ""
    for number, line in enumerate(text.split("\n"), start=1):
        code = re.sub(r"//.*", "", line)
        code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
        code = re.sub(r"'(\\.|[^'\\])*'", "''", code)
        if code.strip().startswith("#"):
            continue
        for ch in code:
            if ch == "{":
                inside = any(kind != "scope" for kind, _, _ in stack)
                head = before.strip()
                is_function = (not inside and ")" in head and not head.endswith("=") and
                               not re.match(r"(namespace|struct|class|enum|union|extern)\b",
                                            head))
                stack.append(("function" if is_function else "inner" if inside else "scope",
                              number, head[-60:]))
                before = ""
            elif ch == "}":
                if stack:
                    kind, first, head = stack.pop()
                    if kind == "function":
                        yield first, number - first + 1, head
                before = ""
            elif ch == ";":
                before = ""
            else:
                before += ch
        before += " "


def python_functions(text: str):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.lineno, node.end_lineno - node.lineno + 1, node.name


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    files = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    offenders = []
    for name in files:
        if name.startswith(SKIPPED) or not (root / name).is_file():
            continue
        if re.search(r"\.(cpp|hpp|cuh|h|c)$", name):
            found = c_functions((root / name).read_text())
        elif name.endswith(".py"):
            found = python_functions((root / name).read_text())
        else:
            continue
        offenders += [(name, first, length, what) for first, length, what in found
                      if length > LIMIT]
    for name, first, length, what in offenders:
        print(f"{name}:{first}: {length} lines (limit {LIMIT}): {what}")
    return 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(main())
