#!/usr/bin/env bash
# Measures what the kernel cache buys: `flashjit compile --arch sm_90a --all` twice into an
# empty cache. The second run must report every kernel `cached` and take under 1/20 of the
# first's time; the script exits 1 otherwise.
# Usage: bench/cache_warm.sh [path/to/flashjit]   (default: build/release/tools/flashjit)
set -euo pipefail
flashjit=${1:-build/release/tools/flashjit}
export FLASHJIT_CACHE_DIR=$(mktemp -d)/cache
trap 'rm -rf "$(dirname "$FLASHJIT_CACHE_DIR")"' EXIT

now_ms() { date +%s%3N; }
timed_compile() {
  local start end
  start=$(now_ms)
  "$flashjit" compile --arch sm_90a --all >"$1"
  end=$(now_ms)
  echo $((end - start))
}

first_ms=$(timed_compile "$FLASHJIT_CACHE_DIR.first.log")
second_ms=$(timed_compile "$FLASHJIT_CACHE_DIR.second.log")
kernels=$(grep -c ' sm_90a ' "$FLASHJIT_CACHE_DIR.second.log")
cached=$(grep -c 'B  cached$' "$FLASHJIT_CACHE_DIR.second.log")
echo "kernels: $kernels; cached on the second run: $cached"
echo "first run (empty cache): ${first_ms} ms; second run (warm cache): ${second_ms} ms"
tail -n 1 "$FLASHJIT_CACHE_DIR.first.log"
tail -n 1 "$FLASHJIT_CACHE_DIR.second.log"
if ((cached != kernels || kernels == 0)); then
  echo "FAIL: the second run did not find every kernel cached" >&2
  exit 1
fi
if ((second_ms * 20 >= first_ms)); then
  echo "FAIL: the warm run took at least 1/20 of the cold run" >&2
  exit 1
fi
echo "PASS: warm/cold = $second_ms/$first_ms ms (< 1/20)"
