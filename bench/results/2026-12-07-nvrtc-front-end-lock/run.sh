#!/usr/bin/env bash
# Two large kernels of the cold set compiled at once: by two threads of one process (the
# library's pool) against two processes, alternating; then where a worker thread sleeps.
# Usage: bash run.sh [path/to/flashjit]   (default build/ci/tools/flashjit; run from the repo)
set -euo pipefail
F=${1:-build/ci/tools/flashjit}
K1='dkdv.hdim128.bf16.br64.bc128.w12.s2.tma.sm90a'
K2='attention_forward.hdim128.bf16.br128.bc176.w12.s2.tma.overlap.pingpong.cluster2.sm90a'
SMALL=(--match delta.bf16.sm90a --match dq_convert.bf16.permuted.sm90a)
C=(compile --arch sm_90a --all)
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
cache() { mktemp -d; }
# The pair: dK/dV and the forward.
pair_threads() {
  FLASHJIT_CACHE_DIR=$(cache) $F "${C[@]}" --op attention-forward --op attention-backward -j 2 \
    --match $K1 --match $K2
}
pair_procs() {
  FLASHJIT_CACHE_DIR=$(cache) $F "${C[@]}" --op attention-backward -j 1 --match $K1 &
  FLASHJIT_CACHE_DIR=$(cache) $F "${C[@]}" --op attention-forward -j 1 --match $K2 &
  wait
}
# The whole set: the library's own command against dK/dV in one process, the rest in another.
set_threads() {
  FLASHJIT_CACHE_DIR=$(cache) $F autotune --warm --arch sm_90a \
    --op attention-forward,attention-backward --head-dim 128 --seqlen 4096 -j 2
}
set_procs() {
  FLASHJIT_CACHE_DIR=$(cache) $F "${C[@]}" --op attention-backward -j 1 --match $K1 &
  FLASHJIT_CACHE_DIR=$(cache) $F "${C[@]}" --op attention-forward --op attention-backward -j 1 \
    --match $K2 "${SMALL[@]}" &
  wait
}
echo "== pair (seconds, wall)"
for r in 1 2 3 4 5; do
  echo "procs $(t pair_procs) threads $(t pair_threads)"
  echo "threads $(t pair_threads) procs $(t pair_procs)"
done
echo "== set (seconds, wall)"
for r in 1 2 3 4 5 6; do
  echo "procs $(t set_procs) threads $(t set_threads)"
  echo "threads $(t set_threads) procs $(t set_procs)"
done
echo "== where the pair's threads sleep (sched_switch to state S, then off CPU > 20 ms)"
perf record -q -e sched:sched_switch --call-graph dwarf,16384 -o /tmp/nvrtc-lock.data -- \
  env FLASHJIT_CACHE_DIR="$(cache)" $F "${C[@]}" --op attention-forward --op attention-backward \
  -j 2 --match $K1 --match $K2 >/dev/null 2>&1
perf script -i /tmp/nvrtc-lock.data 2>/dev/null | python3 "$(dirname "$0")/sleeps.py"
