#!/usr/bin/env python3
"""Fails when the ops' folders lose their shape: a folder under ops/ holding more than LIMIT
files (split it by family, as ops/attention/ is), or a file under a folder with a README.md map
(ops/attention/README.md) that the map does not name in backquotes.

Usage: tools/ops_layout.py [REPOSITORY_ROOT]; prints each problem on a line of its own."""

import pathlib
import re
import subprocess
import sys

LIMIT = 30


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    files = [pathlib.PurePosixPath(name) for name in subprocess.run(
        ["git", "-C", str(root), "ls-files", "ops"], capture_output=True, text=True,
        check=True).stdout.split()]
    problems = []
    per_folder = {}
    for name in files:
        per_folder.setdefault(name.parent, []).append(name)
    for folder, names in sorted(per_folder.items()):
        if len(names) > LIMIT:
            problems.append(f"{folder}: {len(names)} files (at most {LIMIT})")
    for folder in sorted({name.parent for name in files if name.name == "README.md"}):
        named = set(re.findall(r"`([^`\s]+)`", (root / folder / "README.md").read_text()))
        for name in files:
            if folder not in name.parents or name.name == "README.md":
                continue
            if name.name not in named and str(name.relative_to(folder)) not in named:
                problems.append(f"{name}: not named in {folder}/README.md")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
