#!/usr/bin/env bash
# Six forward kernels compiled by two workers of one process: which sleeps on NVRTC's lock.
# Usage: bash six-forwards.sh [path/to/flashjit]   (run from the repository root)
set -euo pipefail
F=${1:-build/ci/tools/flashjit}
M=()
for config in br64.bc64.w8.s2.tma br64.bc64.w8.s2.tma.pshared br64.bc64.w8.s2.tma.overlap \
  br64.bc64.w8.s2.tma.overlap.persistent br128.bc128.w8.s1.wgmma br128.bc64.w8.s1.wgmma; do
  M+=(--match "attention_forward.hdim128.bf16.window.$config.sm90a")
done
perf record -q -e sched:sched_switch --call-graph dwarf,16384 -o /tmp/six-forwards.data -- \
  env FLASHJIT_CACHE_DIR="$(mktemp -d)" $F compile --arch sm_90a --op attention-forward --all \
  -j 2 "${M[@]}" 2>&1 | cut -c1-90
perf script -i /tmp/six-forwards.data 2>/dev/null | python3 "$(dirname "$0")/sleeps.py"
