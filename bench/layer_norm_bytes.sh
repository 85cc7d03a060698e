#!/usr/bin/env bash
# Layer norm's and RMS norm's global bytes against the least they must move (docs/layer-norm.md,
# "How close it comes"): `flashjit run --emulate --op layer-norm --counters` at 768, 4096,
# 16 384 and 65 536 columns, bf16 and fp32, on the sm_90a and sm_80 emulators, and the fused
# forms at the widest rows. Each run also checks the forward and the backward against the
# float64 reference. Counters, not time.
#
# Writes bench/results/<date>-layer-norm-bytes<NAME>.log: a line a run with its two ratios and
# PASS or FAIL; exits 1 when a run fails.
#
# Usage: bench/layer_norm_bytes.sh [path/to/flashjit]   (default: build/release/tools/flashjit)
# Environment: RESULTS_DIR (default: bench/results beside this script), NAME (a suffix for the
# file; default none).
set -euo pipefail
flashjit=${1:-build/release/tools/flashjit}
results_dir=${RESULTS_DIR:-$(cd "$(dirname "$0")" && pwd)/results}
if [[ ! -x $flashjit ]]; then
  echo "layer_norm_bytes.sh: no flashjit at '$flashjit' (build it, or pass its path)" >&2
  exit 2
fi
export FLASHJIT_TUNING=off  # the defaults, whatever a tuning database says
log="$results_dir/$(date -u +%Y-%m-%d)-layer-norm-bytes${NAME:-}.log"
mkdir -p "$results_dir"
{
  echo "# flashjit $(git -C "$(dirname "$0")" rev-parse --short HEAD)," \
    "$(date -u +%Y-%m-%dT%H:%MZ), CPU emulator (counters, not time)"
  echo "# each line: flashjit run --emulate --arch ARCH --op layer-norm --dtype D --rows R" \
    "--cols C --counters [flags]"
} >"$log"
# Rows: enough for several rows a block at the narrow shapes, and a short emulator run at the
# wide ones.
runs=()
for arch in sm_90a sm_80; do
  for dtype in bf16 fp32; do
    runs+=("$arch $dtype 4096 768" "$arch $dtype 4096 4096" "$arch $dtype 512 16384"
           "$arch $dtype 512 65536")
  done
done
for dtype in bf16 fp32; do
  for flags in --rms --bias "--residual --bias"; do runs+=("sm_90a $dtype 512 65536 $flags"); done
done
runs+=("sm_90a bf16 4096 4096 --rms" "sm_90a bf16 4096 768 --residual --bias")
failed=0
for run in "${runs[@]}"; do
  read -r arch dtype rows cols flags <<<"$run"
  # shellcheck disable=SC2086  # flags: zero or more words
  if output=$("$flashjit" run --emulate --arch "$arch" --op layer-norm --dtype "$dtype" \
    --rows "$rows" --cols "$cols" --counters $flags 2>&1); then
    verdict=PASS
  else
    verdict=FAIL
    failed=1
  fi
  ratios=$(grep -E '^(forward|backward)_global_bytes_ratio' <<<"$output" | awk '{print $1, $2}' |
    tr '\n' ' ')
  line="$arch $dtype ${rows}x$cols ${flags:-}: $ratios$verdict"
  echo "$line" | tee -a "$log"
done
echo "wrote $log"
exit $failed
