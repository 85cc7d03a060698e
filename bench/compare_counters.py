#!/usr/bin/env python3
"""Compares two tables of bench/work_counters.sh: the rows of BEFORE and AFTER with the same op
(its mode included), head dim and causal flag, side by side, with the backward's tensor FLOPs
as a multiple of the forward's of the same table (head dim and causal flag alike). The kernels
of each row are in the two tables. A row of AFTER that BEFORE lacks (the backward's
--deterministic mode) is compared with BEFORE's row of the same op without the mode.

Usage: bench/compare_counters.py BEFORE.md AFTER.md > comparison.md
Counted by the emulator, not timed: a counters claim, not a speed claim.
"""
import sys
from typing import Dict, List, Tuple

Key = Tuple[str, str, str]  # op, head dim, causal


def read_table(path: str) -> Dict[Key, Dict[str, str]]:
    """The rows of a work_counters.sh table by (op, head dim, causal)."""
    rows: Dict[Key, Dict[str, str]] = {}
    header: List[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("|") or line.startswith("|---"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not header:
                header = cells
                continue
            row = dict(zip(header, cells))
            rows[(row["op"], row["head dim"], row["causal"])] = row
    return rows


def backward_multiple(rows: Dict[Key, Dict[str, str]], key: Key) -> str:
    """The row's tensor FLOPs over the forward's of the same head dim and causal flag."""
    forward = rows.get(("attention-forward", key[1], key[2]))
    if key[0] == "attention-forward" or forward is None:
        return "—"
    return f"{float(rows[key]['tensor_flops']) / float(forward['tensor_flops']):.2f}"


def cell(rows: Dict[Key, Dict[str, str]], key: Key, field: str) -> str:
    return rows[key][field] if key in rows else "—"


def main(argv: List[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = read_table(argv[1]), read_table(argv[2])
    keys = list(after) + [k for k in before if k not in after]
    print("| op | head dim | causal | tensor FLOPs before | after | × forward before | after | "
          "shared bytes / tensor FLOP before | after | change | global bytes ratio before | "
          "after |")
    print("|---" * 12 + "|")
    for key in keys:
        base_key = (key[0].replace(" --deterministic", ""), key[1], key[2])
        old = key if key in before else base_key
        shared_before = cell(before, old, "shared_bytes_per_tensor_flop")
        shared_after = cell(after, key, "shared_bytes_per_tensor_flop")
        change = "—"
        if "—" not in (shared_before, shared_after):
            change = f"{(float(shared_after) / float(shared_before) - 1) * 100:+.1f} %"
        print("| " + " | ".join([
            key[0], key[1], key[2], cell(before, old, "tensor_flops"), cell(after, key, "tensor_flops"),
            backward_multiple(before, old) if old in before else "—",
            backward_multiple(after, key) if key in after else "—",
            shared_before, shared_after, change,
            cell(before, old, "global_bytes_ratio"), cell(after, key, "global_bytes_ratio"),
        ]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
