#!/usr/bin/env bash
# Layer norm's bytes in flight an SM by the emulator's memory model (docs/layer-norm.md, "Loads
# ahead of the row"): the default forward and backward at row lengths of 384 to 4096 columns,
# bf16 and fp32, 4096 rows, on the sm_90a emulator. Each run is `flashjit run --emulate --arch
# sm_90a --op layer-norm --counters-json`, which also checks both against the float64
# reference. Counters, not time.
#
# Writes bench/results/<date>-layer-norm-in-flight<NAME>.log: a line a run with the kernels'
# names and their bytes in flight an SM (forward, backward, parameter gradients); exits 1 when
# a run fails.
#
# Usage: bench/layer_norm_in_flight.sh [path/to/flashjit]   (default: build/release/tools/flashjit)
# Environment: RESULTS_DIR (default: bench/results beside this script), NAME (a suffix for the
# file; default none), COLS (the row lengths; default below).
set -euo pipefail
flashjit=${1:-build/release/tools/flashjit}
results_dir=${RESULTS_DIR:-$(cd "$(dirname "$0")" && pwd)/results}
if [[ ! -x $flashjit ]]; then
  echo "layer_norm_in_flight.sh: no flashjit at '$flashjit' (build it, or pass its path)" >&2
  exit 2
fi
export FLASHJIT_TUNING=off  # the defaults, whatever a tuning database says
log="$results_dir/$(date -u +%Y-%m-%d)-layer-norm-in-flight${NAME:-}.log"
json=$(mktemp)
trap 'rm -f "$json"' EXIT
mkdir -p "$results_dir"
echo "# flashjit $(git -C "$(dirname "$0")" rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ)," \
  "CPU emulator (counters, not time): dtype, columns, kernels, bytes in flight an SM" >"$log"
failed=0
for dtype in bf16 fp32; do
  for cols in ${COLS:-384 512 768 1280 1536 2048 2560 3072 4096}; do
    rm -f "$json"  # a failed run must not report the previous run's figures
    if ! "$flashjit" run --emulate --arch sm_90a --op layer-norm --dtype "$dtype" --rows 4096 \
      --cols "$cols" --counters-json "$json" >/dev/null 2>&1; then
      echo "$dtype $cols FAIL" | tee -a "$log"
      failed=1
      continue
    fi
    figures=$(python3 -c '
import json, sys
kernels = json.load(open(sys.argv[1]))["kernels"]
print(" ".join(k["kernel"] for k in kernels),
      [k["counters"]["memory"]["bytes_in_flight_per_sm"] for k in kernels])' "$json")
    echo "$dtype $cols $figures PASS" | tee -a "$log"
  done
done
echo "wrote $log"
exit $failed
