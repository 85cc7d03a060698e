#!/usr/bin/env python3
"""Compares two folders of PTX (`flashjit compile --emit-ptx DIR`, before and after a change)
kernel by kernel, after normalizing what moving or reordering headers changes without changing
the code: NVRTC's per-translation-unit hash in the names of internal-linkage constants, and the
order of module-scope .global declarations (which follows include order). Prints each kernel
that differs, missing or new, then a summary; exits 1 when any differs.

Usage: tools/compare_ptx.py BEFORE_DIR AFTER_DIR [--show N]  (N: lines of diff per kernel)"""

import argparse
import difflib
import pathlib
import re
import sys

INTERNAL = re.compile(r"(_ZN\d+)?_INTERNAL_\w*?_cu_[0-9a-f]{8}_\d+")


def normalized(path: pathlib.Path) -> list:
    lines = INTERNAL.sub("INTERNAL_", path.read_text()).split("\n")
    body = [line for line in lines if not line.startswith(".global")]
    return body + sorted(line for line in lines if line.startswith(".global"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=pathlib.Path)
    parser.add_argument("after", type=pathlib.Path)
    parser.add_argument("--show", type=int, default=0)
    args = parser.parse_args()
    before = {p.name: p for p in args.before.glob("*.ptx")}
    after = {p.name: p for p in args.after.glob("*.ptx")}
    same = differ = 0
    for name in sorted(before.keys() | after.keys()):
        if name not in after or name not in before:
            print(("missing after: " if name not in after else "new after: ") + name)
            differ += 1
            continue
        a, b = normalized(before[name]), normalized(after[name])
        if a == b:
            same += 1
            continue
        differ += 1
        print("differs: " + name)
        if args.show:
            diff = list(difflib.unified_diff(a, b, lineterm="", n=0))[2:]
            print("\n".join("    " + line for line in diff[:args.show]))
    print(f"{len(before)} kernels before, {len(after)} after: {same} identical after "
          f"normalizing, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
