#!/usr/bin/env bash
# NVRTC's time per phase (front end, NVVM optimizer, ptxas) for one kernel of flashjit's
# templates, the least of REPEATS runs each, and ptxas's report of the last run: where a
# kernel's cold compile goes (`flashjit bench --first-result` gives the total).
#
# Usage: bench/nvrtc_phases.sh TEMPLATE_DIR HEADER NAME_EXPRESSION [ARCH]
#   e.g. bench/nvrtc_phases.sh templates attention/hopper/tma_forward_kernel.cuh \
#        'flashjit::attention_forward_tma_kernel<flashjit::TmaForwardTraits<flashjit::bfloat16_t,
#         128, 128, 176, flashjit::MaskKind::none, false, 2, true, true, false, false>>'
# (`flashjit compile --op attention-forward --arch sm_90a -v` prints a kernel's name expression.)
# Environment: REPEATS (default 5), CUDA_HOME (default /usr/local/cuda).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
templates=$1 header=$2 expression=$3 arch=${4:-sm_90a} repeats=${REPEATS:-5}
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -std=c++17 -O1 -o "$work/phases" "$(dirname "$0")/nvrtc_phases.cpp" -I"$cuda/include" \
  -L"$cuda/lib64" -lnvrtc -Wl,-rpath,"$cuda/lib64"
for ((run = 1; run <= repeats; ++run)); do
  "$work/phases" "$templates" "$header" "$expression" "$arch" "$work/time.csv" > "$work/log"
  # Rows: file, phase, milliseconds, unit.
  awk -F', ' 'NR > 1 { phase = $2; gsub(/ /, "_", phase); printf "%s=%s ", phase, $3 }
              END { print "" }' "$work/time.csv"
  rm -f "$work/time.csv"
done | awk -v repeats="$repeats" '
  { n = split($0, fields, " "); total = 0
    for (i = 1; i <= n; ++i) { split(fields[i], kv, "="); name[i] = kv[1]
      if (NR == 1 || kv[2] < least[i]) least[i] = kv[2] } count = n }
  END { printf "least of %d runs (ms):", repeats
        for (i = 1; i <= count; ++i) { printf " %s %s;", name[i], least[i]; sum += least[i] }
        printf " sum %d\n", sum }' | sed 's/_/ /g'
grep -E "registers|spill|C75|Performance Loss" "$work/log" || true
