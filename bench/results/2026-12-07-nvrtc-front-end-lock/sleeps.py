"""Prints each sleep (switch-out in state S) of a flashjit thread that lasts over 20 ms, with the
first frames of its stack, from `perf script` output of sched:sched_switch with call graphs."""
import re
import sys

events = []
for block in sys.stdin.read().split("\n\n"):
    m = re.search(r"flashjit\s+(\d+)\s+\[\d+\]\s+([\d.]+): sched:sched_switch: "
                  r"prev_comm=flashjit prev_pid=\d+ prev_prio=\d+ prev_state=(\S+)", block)
    if m:
        events.append((int(m.group(1)), float(m.group(2)), m.group(3), block))
start = events[0][1] if events else 0.0
for i, (tid, at, state, block) in enumerate(events):
    later = [e for e in events[i + 1:] if e[0] == tid]
    if not state.startswith("S") or not later or later[0][1] - at < 0.02:
        continue
    print(f"thread {tid} sleeps at +{1000 * (at - start):.0f} ms until its next switch-out "
          f"{1000 * (later[0][1] - at):.0f} ms later; stack:")
    frames = [line.split(None, 1)[1] for line in block.split("\n")[1:] if line.strip()]
    frames = [f for f in frames if "kernel.kallsyms" not in f]
    print("\n".join("    " + f for f in frames[:8]))
